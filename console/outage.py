"""A database or Redis outage answers 503 with Retry-After, never an HTML 500 page.

Django calls ``server_error`` (``handler500``) for any exception a view or middleware lets
out, inside the ``except`` that caught it. When that exception is the database or the shared
cache being unreachable (``OperationalError``, ``InterfaceError``, ``RedisError``), the API
answers ``{"detail": …}`` as JSON and the pages show templates/503.html, both with
``Retry-After``. Django still logs the error once, with its traceback. Anything else is
Django's own 500.

The 503 page is rendered without the request's context processors, which would read the
database again.
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults
from redis.exceptions import RedisError

RETRY_AFTER_SECONDS = 30
OUTAGES = (OperationalError, InterfaceError, RedisError)
API_PREFIX = "/api/"
MESSAGE = "The service is unavailable: its database cannot be reached. Try again shortly."


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
        body = loader.get_template("503.html").render({"retry_after": RETRY_AFTER_SECONDS})
        response = HttpResponse(body, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: 503 for an outage, Django's 500 page for anything else."""
    if is_outage(sys.exc_info()[1]):
        return outage_response(request)
    return defaults.server_error(request)
