"""Structured logs: production writes one JSON object a line; web requests carry an id."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory

from console.logs import HEADER, JsonFormatter, RequestIdMiddleware

ROOT = Path(__file__).resolve().parent.parent

PRODUCTION_LOGS = """
import logging
import django
django.setup()
logging.getLogger("jobs.services.cycle").info(
    "cycle: 2 admitted", extra={"admitted": 2, "preempted": 1, "pending": 3, "duration": 0.25}
)
logging.getLogger("console").warning('a "quoted"\\nmessage over two lines')
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("django.request").exception("boom")
logging.getLogger("console").info("below the level: not written")
"""


def test_production_logs_one_json_object_a_line_with_the_fields() -> None:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="console.settings.production",
        SECRET_KEY="x" * 50,
        LOG_LEVEL="WARNING",
        DATABASE_URL="",
    )
    done = subprocess.run(
        [sys.executable, "-c", PRODUCTION_LOGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    entries = [json.loads(line) for line in lines]  # every line is one object
    assert len(entries) == 3, lines
    cycle, warning, error = entries
    for entry in entries:
        assert {"time", "level", "logger", "message"} <= entry.keys()
        assert entry["time"].endswith("+00:00")
    # The cycle's summary is written at INFO whatever LOG_LEVEL says of the rest.
    assert cycle["logger"] == "jobs.services.cycle" and cycle["level"] == "INFO"
    assert (cycle["admitted"], cycle["preempted"], cycle["pending"]) == (2, 1, 3)
    assert cycle["duration"] == 0.25
    assert warning["message"] == 'a "quoted"\nmessage over two lines'
    assert error["level"] == "ERROR" and "ZeroDivisionError" in error["exception"]


def _capture() -> tuple[logging.Logger, StringIO]:
    stream = StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.request")
    logger.handlers = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, stream


@pytest.mark.parametrize(
    ("given", "kept"),
    [(None, False), ("lb-7f3a:01", True), ("bad id with spaces", False), ("x" * 65, False)],
    ids=["none", "plain", "spaces", "too-long"],
)
def test_a_request_logs_and_answers_its_id(given: str | None, kept: bool) -> None:
    logger, stream = _capture()

    def view(request: HttpRequest) -> HttpResponse:
        logger.info("inside the request")
        return HttpResponse("ok")

    headers = {f"HTTP_{HEADER.upper().replace('-', '_')}": given} if given else {}
    response = RequestIdMiddleware(view)(RequestFactory().get("/", **headers))
    logger.info("after it")
    inside, after = (json.loads(line) for line in stream.getvalue().splitlines())
    assert inside["request_id"] == response[HEADER]
    assert (response[HEADER] == given) is kept
    assert "request_id" not in after


def test_every_response_carries_a_request_id(db: None) -> None:
    assert Client().get("/login/")[HEADER]
