"""A database or Redis outage answers 503 with Retry-After, never an HTML 500 page.

Django calls ``server_error`` (``handler500``) for any exception a view or middleware lets
out, inside the ``except`` that caught it. When that exception is the database or the shared
cache being unreachable (``OperationalError``, ``InterfaceError``, ``RedisError``), the API
answers ``{"detail": …}`` as JSON and the pages show templates/503.html, both with
``Retry-After``. Django still logs the error once, with its traceback. Anything else is
a 500: JSON under /api/, templates/500.html elsewhere.

The error pages are rendered without the request's context processors, which would read the
database again; and a page that cannot render (say, the static manifest is missing) falls back
to one plain line, since an error page must never raise.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from redis.exceptions import RedisError

RETRY_AFTER_SECONDS = 30
OUTAGES = (OperationalError, InterfaceError, RedisError)
API_PREFIX = "/api/"
MESSAGE = "The service is unavailable: its database cannot be reached. Try again shortly."
SERVER_ERROR = "Server error: it has been logged. Try again, or tell a platform admin."

log = logging.getLogger(__name__)


def is_outage(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) is the database or Redis being unreachable."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, OUTAGES):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


def outage_response(request: HttpRequest) -> HttpResponse:
    """503 for an outage: JSON under /api/, the 503 page elsewhere."""
    response: HttpResponse
    if request.path.startswith(API_PREFIX):
        response = JsonResponse({"detail": MESSAGE}, status=503)
    else:
        response = _page("503.html", {"retry_after": RETRY_AFTER_SECONDS}, MESSAGE, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _page(template: str, context: dict[str, object], plain: str, *, status: int) -> HttpResponse:
    """The error page `template`, or `plain` in one line if it cannot render."""
    try:
        body = loader.get_template(template).render(context)
    except Exception as err:  # noqa: BLE001 - whatever broke the page, answer something
        log.error("The %s page could not render (%s: %s)", status, type(err).__name__, err)
        body = f"<!doctype html><title>{status}</title><p>{plain}</p>"
    return HttpResponse(body, status=status)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: 503 for an outage, a 500 (JSON under /api/, the page elsewhere) otherwise."""
    if is_outage(sys.exc_info()[1]):
        return outage_response(request)
    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": SERVER_ERROR}, status=500)
    return _page("500.html", {}, SERVER_ERROR, status=500)
