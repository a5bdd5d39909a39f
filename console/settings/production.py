"""Distributed mode: PostgreSQL, Redis, Celery; refuses to start without a real secret."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from console.logs import json_logging

from .base import *  # noqa: F403
from .base import env, env_bool

SECRET_KEY = env("SECRET_KEY", "")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set in the environment for production.")

DEBUG = False
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = int(env("SECURE_HSTS_SECONDS", "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
TIDEPOOL_RUNNER = env("TIDEPOOL_RUNNER", "celery")
TIDEPOOL_BACKEND = env("TIDEPOOL_BACKEND", "kubernetes")
if K8S_INSTANCE == "tidepool":  # noqa: F405
    raise ImproperlyConfigured(
        "TIDEPOOL_K8S_INSTANCE is 'tidepool', the old shared default: every Tidepool database "
        "with it owns the same pods, so a staging or restored copy would delete production's. "
        "Unset it to use the id this database chose at install time, or set a unique one."
    )

# One JSON object a line on stderr (console/logs.py); Celery keeps its hands off the root
# logger, so the worker's and beat's records are JSON too.
LOGGING = json_logging(env("LOG_LEVEL", "WARNING"))
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
