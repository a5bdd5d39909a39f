"""Settings shared by every mode; each value can be overridden from the environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

BASE_DIR = Path(__file__).resolve().parents[2]


def env(name: str, default: str) -> str:
    """Read a setting from the environment with a default."""
    return os.environ.get(name, default)


def truthy(text: str) -> bool:
    """Whether a setting's text says yes ("1", "true", "yes", "on", in any case)."""
    return text.lower() in {"1", "true", "yes", "on"}


def env_bool(name: str, default: bool) -> bool:
    """Read a boolean setting from the environment."""
    return truthy(env(name, "1" if default else "0"))


SECRET_KEY = env("SECRET_KEY", "")
DEBUG = False
ALLOWED_HOSTS = [h for h in env("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "channels",
    "django_celery_beat",
    "cluster",
    "quotas",
    "workspaces",
    "jobs",
    "dashboard",
    "whatif",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "console.middleware.RefuseNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.zones.DisplayZoneMiddleware",
]

ROOT_URLCONF = "console.urls"
ASGI_APPLICATION = "console.asgi.application"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.navigation",
                "console.context_processors.clock",
            ],
        },
    },
]

# The speed layer (console/fast): off, the stock ORM, serializers, SQLite backend and ASGI
# handler serve the same answers.
TIDEPOOL_FAST_PATHS = env_bool("TIDEPOOL_FAST_PATHS", True)


def sqlite(name: str) -> dict[str, Any]:
    """The embedded database: SQLite at that path, tuned for one busy process."""
    return {
        # Django's SQLite backend, with this process's writers queued (console/fast/sqlite).
        "ENGINE": "console.fast.sqlite" if TIDEPOOL_FAST_PATHS else "django.db.backends.sqlite3",
        "NAME": name,
        # WAL lets pages read while the control loop writes; IMMEDIATE takes the write lock
        # up front, so concurrent writers wait instead of failing with "database is locked".
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
        # The server's worker threads live as long as it does; each keeps its connection
        # instead of opening (and re-running init_command) for every request.
        "CONN_MAX_AGE": None,
    }


def database(url: str) -> dict[str, Any]:
    """The default database: embedded SQLite, or what a DATABASE_URL names (dj-database-url).

    The URL's query string becomes OPTIONS, so `?sslmode=verify-full&sslrootcert=…` reaches
    psycopg. PostgreSQL connections come from psycopg's pool, one per process: Django's ASGI
    handler runs each request on a thread of its own, so a connection kept by its thread
    (CONN_MAX_AGE) would never be reused, while the pool takes it back at the request's end
    and checks it before lending it again. `?pool=false` in the URL (or DATABASE_POOL=0) keeps
    a connection per thread for DATABASE_CONN_MAX_AGE seconds instead.
    """
    if not url:
        return sqlite(env("SQLITE_PATH", str(BASE_DIR / "tidepool.sqlite3")))
    config: dict[str, Any] = dict(
        dj_database_url.parse(
            url,
            conn_max_age=int(env("DATABASE_CONN_MAX_AGE", "60")),
            conn_health_checks=True,
        )
    )
    if config["ENGINE"] == "django.db.backends.sqlite3":
        return sqlite(config["NAME"])
    options = config.setdefault("OPTIONS", {})
    if truthy(str(options.pop("pool", env("DATABASE_POOL", "true")))):
        options["pool"] = {
            "min_size": int(env("DATABASE_POOL_MIN", "2")),
            "max_size": int(env("DATABASE_POOL_MAX", "10")),
        }
        config["CONN_MAX_AGE"] = 0  # the pool keeps the connections; Django refuses both
    return config


DATABASES = {"default": database(env("DATABASE_URL", ""))}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "console.auth.CompiledModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None
GUARDIAN_MONKEY_PATCH_USER = False

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# A form with a failed CSRF token gets the app's 403 page, in words (console/views.py).
CSRF_FAILURE_VIEW = "console.views.csrf_failure"
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# plotly.js is served from packages, never from a CDN: the plotly package's full bundle, and
# npm's partial "finance" bundle (package.json; `make install` runs npm ci into node_modules).
PLOTLY_FINANCE = BASE_DIR / "node_modules" / "plotly.js-finance-dist-min"
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("plotly", str(Path(plotly.__file__).parent / "package_data")),
    ("plotly-finance", str(PLOTLY_FINANCE)),
]

# The pages load plotly.js deferred (console.templatetags): the partial bundle (1.3 MB: scatter,
# bar, indicator, pie…) where npm installed it, else the full one (4.8 MB). Chromium spends
# most of the dashboard's time to first chart evaluating it (bench/first_chart.py).
PLOTLY_BUNDLE = (
    "plotly-finance/plotly-finance.min.js"
    if (PLOTLY_FINANCE / "plotly-finance.min.js").exists()
    else "plotly/plotly.min.js"
)

REDIS_URL = env("REDIS_URL", "")
# Live consumers re-join their group every fifth of this (jobs/consumers.py), so a member that
# never left (its web process died mid-disconnect) stops being sent events within 5 minutes
# instead of channels_redis's default day.
GROUP_EXPIRY = 300
CHANNEL_LAYERS = (
    {
        "default": {
            # channels_redis's, with one reader per process (console/layers.py).
            "BACKEND": "console.layers.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        # A socket's receive blocks 5 s in Redis (BZPOPMIN); with redis-py's
                        # default 5 s read timeout every quiet socket was dropped each 5 s.
                        "socket_timeout": 10,
                        "socket_connect_timeout": 2,
                        # A pooled connection that died with a Redis restart fails its next
                        # command; retried once on a new connection, the first join after
                        # Redis returns succeeds instead of dropping the socket again.
                        "retry": Retry(NoBackoff(), 1),
                        # redis-py's asyncio pool refuses a 101st connection in use
                        # (MaxConnectionsError) rather than wait: a burst of pushes and
                        # re-joins from a few hundred sockets reached it.
                        "max_connections": 1000,
                    }
                ],
                "group_expiry": GROUP_EXPIRY,
                # A web process's sockets share one Redis list, a group send one entry in it
                # whatever the sockets: 100 (the default) overflowed, dropping events, while a
                # busy process's loop fell behind a burst of submits.
                "capacity": 1000,
            },
        }
    }
    if REDIS_URL
    else {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"group_expiry": GROUP_EXPIRY},
        }
    }
)
# The cache (token throttling, for one) is shared by every web process in the distributed mode.
# Short timeouts: a request's wake-up or throttle gives up quickly on an unreachable Redis.
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "socket_timeout": 2,
                "socket_connect_timeout": 2,
                "pool_class": "console.cache.SharedConnectionPool",
            },
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "console.auth.CompiledTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's three, its JSON parser bounded in depth and refusing NUL in strings.
    "DEFAULT_PARSER_CLASSES": [
        "console.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "console.schema.TidepoolAutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tidepool API",
    "VERSION": "1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # Several resources have a `status` field with its own choices: each set gets its name.
    "ENUM_NAME_OVERRIDES": {
        "WorkloadStatusEnum": "jobs.choices.Status",
        "PodStatusEnum": "jobs.choices.PodStatus",
        "WhatIfStatusEnum": "whatif.choices.RunStatus",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "console.schema.postprocess",
    ],
}

# Every server error leaves one record on stderr, with its traceback. Django's default sends
# django.request's errors only to mail_admins when DEBUG is off: with no ADMINS, nowhere.
# Django's loggers lose their default handlers and propagate to the root's one, so nothing
# is written twice (uvicorn logs what escapes the ASGI app, a consumer's exception, itself).
# django.request's 4xx warnings (a hostile client makes many) are left out.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"line": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "line",
        }
    },
    "root": {"handlers": ["stderr"], "level": env("LOG_LEVEL", "WARNING")},
    "loggers": {
        "django": {"handlers": [], "level": env("LOG_LEVEL", "WARNING")},
        "django.request": {"level": "ERROR"},
    },
}

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"

# Tidepool: which control loop and cluster backend run, and how fast the simulated clock goes.
TIDEPOOL_RUNNER = env("TIDEPOOL_RUNNER", "embedded")
TIDEPOOL_BACKEND = env("TIDEPOOL_BACKEND", "simulated")
SIM_SPEED = float(env("SIM_SPEED", "144"))
SIM_START_DELAY = float(env("SIM_START_DELAY", "30"))

# The Kubernetes backend (TIDEPOOL_BACKEND=kubernetes); README "Modes" explains each one.
# No KUBECONFIG means the in-cluster service account.
K8S_KUBECONFIG = env("KUBECONFIG", "")
K8S_CONTEXT = env("TIDEPOOL_K8S_CONTEXT", "")
K8S_NAMESPACE = env("TIDEPOOL_K8S_NAMESPACE", "tidepool-{workspace}")
# Empty: the id this database chose at install time (jobs migration 0009), the label value
# of every pod it owns, so a staging or restored database never takes another's pods.
K8S_INSTANCE = env("TIDEPOOL_K8S_INSTANCE", "")
K8S_NODE_POOL_LABEL = env("TIDEPOOL_K8S_NODE_POOL_LABEL", "tidepool.io/node-pool")
K8S_GPU_RESOURCE = env("TIDEPOOL_K8S_GPU_RESOURCE", "nvidia.com/gpu")
K8S_SHARED_GPU_RESOURCE = env("TIDEPOOL_K8S_SHARED_GPU_RESOURCE", "")
K8S_GPU_SLICES = int(env("TIDEPOOL_K8S_GPU_SLICES", "0"))
K8S_WATCH_SECONDS = int(env("TIDEPOOL_K8S_WATCH_SECONDS", "240"))  # 60 to 300
K8S_PAGE_SIZE = int(env("TIDEPOOL_K8S_PAGE_SIZE", "500"))  # pods per list page
K8S_QPS = float(env("TIDEPOOL_K8S_QPS", "5"))  # client-side rate limit, as client-go's
K8S_BURST = int(env("TIDEPOOL_K8S_BURST", "10"))
K8S_REQUEST_SECONDS = float(env("TIDEPOOL_K8S_REQUEST_SECONDS", "30"))
K8S_BACKOFF_SECONDS = float(env("TIDEPOOL_K8S_BACKOFF_SECONDS", "0.5"))  # first 5xx retry
K8S_MAX_DELETES = int(env("TIDEPOOL_K8S_MAX_DELETES", "50"))  # pod deletions per sync
K8S_RETENTION_SECONDS = float(env("TIDEPOOL_K8S_RETENTION_SECONDS", "3600"))  # finished pods
K8S_TERMINATING_SECONDS = float(env("TIDEPOOL_K8S_TERMINATING_SECONDS", "600"))
K8S_IMAGE_PULL_GRACE_SECONDS = float(env("TIDEPOOL_K8S_IMAGE_PULL_GRACE_SECONDS", "300"))
K8S_PENDING_SECONDS = float(env("TIDEPOOL_K8S_PENDING_SECONDS", "900"))  # never started
K8S_NOT_READY_SECONDS = float(env("TIDEPOOL_K8S_NOT_READY_SECONDS", "300"))
K8S_NODE_SYNC_SECONDS = float(env("TIDEPOOL_K8S_NODE_SYNC_SECONDS", "60"))
# Tidepool's pods name this scheduler, so kube-scheduler leaves them to Tidepool's binding.
K8S_SCHEDULER_NAME = env("TIDEPOOL_K8S_SCHEDULER_NAME", "tidepool")
# How replicas are placed (README "Placement"): "fgd", where the expected fragmentation under
# the workload the cluster sees grows least (the default), or "bestfit", the tightest node.
TIDEPOOL_PLACEMENT = env("TIDEPOOL_PLACEMENT", "fgd")
if TIDEPOOL_PLACEMENT not in ("fgd", "bestfit"):
    raise ImproperlyConfigured(
        f"TIDEPOOL_PLACEMENT must be fgd or bestfit, not {TIDEPOOL_PLACEMENT!r}"
    )
# A node that refused a pod (a kubelet admission rejection) takes no new pods for this long.
TIDEPOOL_NODE_COOLDOWN_SECONDS = float(env("TIDEPOOL_NODE_COOLDOWN_SECONDS", "300"))
# Where an interactive instance's Open link goes on Kubernetes, e.g.
# "https://notebooks.example/{namespace}/{pod}" ({workspace}, {workload}, {node} too); empty:
# no link. The simulated backend links to a placeholder page of the console instead.
TIDEPOOL_INSTANCE_URL_TEMPLATE = env("TIDEPOOL_INSTANCE_URL_TEMPLATE", "")

# Reports from running jobs (README "Reports from running jobs"): the base URL pods reach the
# console at (their TIDEPOOL_REPORT_URL is its /api/v1/report/), and how often each process
# writes the reports it buffered (seconds; 0: only when told, as the tests do).
TIDEPOOL_REPORT_URL = env("TIDEPOOL_REPORT_URL", "http://127.0.0.1:8000")
TIDEPOOL_REPORT_FLUSH_SECONDS = float(env("TIDEPOOL_REPORT_FLUSH_SECONDS", "2"))

# Operating it (README "Operating it"): probes, /metrics, request ids and request latency.
# /healthz, /readyz and /metrics are answered first, before host checks and redirects.
MIDDLEWARE = [
    "console.health.ProbeMiddleware",
    "console.logs.RequestIdMiddleware",
    "console.metrics_view.RequestTimingMiddleware",
    *MIDDLEWARE,
]
# /metrics needs `Authorization: Bearer <token>`, or TIDEPOOL_METRICS_OPEN: "1" (anyone) or
# "localhost" (loopback clients, for `make demo`). Neither: 403. Never open by default.
TIDEPOOL_METRICS_TOKEN = env("TIDEPOOL_METRICS_TOKEN", "")
TIDEPOOL_METRICS_OPEN = env("TIDEPOOL_METRICS_OPEN", "0")
# Request latency by route (console.metrics_view.RequestTimingMiddleware); 0 leaves it out.
TIDEPOOL_METRICS_HTTP = env_bool("TIDEPOOL_METRICS_HTTP", True)
# In the distributed mode /readyz wants a cycle this recent (seconds); 0 leaves it out.
TIDEPOOL_READY_CYCLE_AGE = float(env("TIDEPOOL_READY_CYCLE_AGE", "120"))
