"""Health probes: /healthz (the process lives) and /readyz (it can serve).

/readyz answers 200 when the database answers, Redis answers (when one is configured) and, in
the distributed mode (TIDEPOOL_RUNNER=celery), a scheduling cycle succeeded within
TIDEPOOL_READY_CYCLE_AGE seconds (0 leaves the cycle out); 503 otherwise. Each check has a
short timeout of its own, so a probe never waits on psycopg's pool (which waits 30 s for a
connection while PostgreSQL is down). Bodies say only "ok" or "unready": the reason goes
to the log.

ProbeMiddleware, first in MIDDLEWARE, answers the probes and /metrics before any other
middleware: a kubelet or Prometheus asks by the pod's IP, which ALLOWED_HOSTS does not name and
SECURE_SSL_REDIRECT would redirect; neither needs a session, a user or CSRF.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse

from console import metrics

log = logging.getLogger(__name__)
TIMEOUT = 2  # seconds, for each of the database and Redis
_redis: Any = None


def healthz(request: HttpRequest) -> HttpResponse:
    """200 while the process can answer at all."""
    return _plain("ok", 200)


def readyz(request: HttpRequest) -> HttpResponse:
    """200 when every dependency answers (see the module's docstring), else 503."""
    problem = unready()
    if problem:
        log.warning("not ready: %s", problem)
        return _plain("unready", 503)
    return _plain("ok", 200)


def unready() -> str | None:
    """What keeps the process from being ready, or None."""
    for check in (_database, _redis_ping, _cycle):
        try:
            problem = check()
        except Exception as error:  # any failure of a dependency means not ready
            problem = f"{check.__name__.lstrip('_')}: {type(error).__name__}: {error}"
        if problem:
            return problem
    return None


def _database() -> str | None:
    """SELECT 1 on a connection of its own (PostgreSQL, 2 s timeout) or Django's (SQLite)."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return None
    import psycopg

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params["connect_timeout"] = TIMEOUT
    with psycopg.connect(**params) as conn:
        conn.execute("SELECT 1")
    return None


def _redis_ping() -> str | None:
    """PING Redis, when one is configured."""
    global _redis
    if not settings.REDIS_URL:
        return None
    if _redis is None:
        import redis

        _redis = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT
        )
    _redis.ping()
    return None


def _cycle() -> str | None:
    """In the distributed mode, a cycle succeeded recently."""
    limit = float(settings.TIDEPOOL_READY_CYCLE_AGE)
    if settings.TIDEPOOL_RUNNER != "celery" or limit <= 0:
        return None
    last = metrics.last_success(metrics.LAST_CYCLE_KEY)
    if last is None:
        return "no scheduling cycle recorded yet"
    age = time.time() - last
    return f"the last scheduling cycle was {age:.0f} s ago" if age > limit else None


def _plain(text: str, status: int) -> HttpResponse:
    response = HttpResponse(text + "\n", status=status, content_type="text/plain")
    response["Cache-Control"] = "no-store"
    return response


class ProbeMiddleware:
    """Answer /healthz, /readyz and /metrics before the other middleware (no host check)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        from console.metrics_view import metrics_view

        self.get_response = get_response
        self.views: dict[str, Callable[[HttpRequest], HttpResponse]] = {
            "/healthz": healthz,
            "/readyz": readyz,
            "/metrics": metrics_view,
        }

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Serve a probe, or pass the request on."""
        view = self.views.get(request.path.rstrip("/") or "/")
        if view is None:
            return self.get_response(request)
        return view(request)
