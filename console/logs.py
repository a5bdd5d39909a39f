"""Structured logs: one JSON object a line (production), and request ids on web requests.

JsonFormatter writes time, level, logger, message, request_id (inside a web request) and any
`extra` fields a call passes (the cycle's summary passes admitted, preempted, pending and
duration). RequestIdMiddleware takes the client's X-Request-ID when it is a plain token, or
makes one, keeps it in a context variable for the request's log records and answers it in
the response's X-Request-ID header.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tidepool_request_id", default=None
)
HEADER = "X-Request-ID"
# A client's id is kept when it is this plain (a proxy's or load balancer's id), else replaced.
GIVEN_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")

# The attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys() | {"message", "asctime"}
)


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        """time (UTC, ISO 8601), level, logger, message, request_id, extras, exception."""
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = REQUEST_ID.get()
        if request_id is not None:
            entry["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in entry and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class RequestIdFilter(logging.Filter):
    """Set record.request_id (or "-") for line formats that name it."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always keep the record."""
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get() or "-"
        return True


def request_id_of(request: HttpRequest) -> str:
    """The client's X-Request-ID when it is a plain token, else a new one."""
    given = request.headers.get(HEADER, "")
    return given if GIVEN_ID.match(given) else uuid.uuid4().hex


class RequestIdMiddleware:
    """Give the request an id for its log records and answer it in X-Request-ID."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Set the id around the rest of the chain."""
        request_id = request_id_of(request)
        token = REQUEST_ID.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            REQUEST_ID.reset(token)
        response[HEADER] = request_id
        return response


def json_logging(level: str) -> dict[str, Any]:
    """The LOGGING setting of production: JSON lines on stderr, the cycle's summary at INFO."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "console.logs.JsonFormatter"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "json",
            }
        },
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            "django": {"handlers": [], "level": level},
            "django.request": {"level": "ERROR"},
            # One summary line per cycle, whatever LOG_LEVEL says of the rest.
            "jobs.services.cycle": {"level": "INFO"},
        },
    }
