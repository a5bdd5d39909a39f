"""Every server error leaves exactly one log record on stderr, with its traceback.

uvicorn serves console.serving's app in a fresh process under the production settings, as
the README runs it; one request that raises in a view, one websocket whose consumer raises.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(port: int, server: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()[1]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("uvicorn did not start")


def _serve_and_fail(port: int) -> str:
    """Start uvicorn, make one HTTP request and one websocket fail; its stderr."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings.production",
        "SECRET_KEY": "tidepool-test-production-key",
        "SECURE_SSL_REDIRECT": "0",
        "SQLITE_PATH": str(Path(tempfile.mkdtemp()) / "db.sqlite3"),
    }
    env.pop("LOG_LEVEL", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "tests.api.serve_failing:application"]
        + ["--port", str(port), "--loop", "uvloop", "--http", "httptools"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(port, server)
        with pytest.raises(urllib.error.HTTPError) as http:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/jobs/", timeout=30)
        assert http.value.code == 500
        origin = f"http://127.0.0.1:{port}"
        with pytest.raises(InvalidStatus) as ws:
            connect(f"ws://127.0.0.1:{port}/ws/cluster/", origin=origin, open_timeout=30)
        assert ws.value.response.status_code == 500
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    return stderr


def test_each_server_error_leaves_one_record_with_its_traceback() -> None:
    stderr = _serve_and_fail(free_port())
    assert stderr.count("Traceback (most recent call last)") == 2, stderr
    assert stderr.count("RuntimeError: boom over http") == 1, stderr
    assert stderr.count("RuntimeError: boom over websocket") == 1, stderr
    request_errors = [line for line in stderr.splitlines() if "django.request" in line]
    assert len(request_errors) == 1, stderr
    # Production logs one JSON object a line (console/logs.py): the traceback is in the record.
    entry = json.loads(request_errors[0])
    assert (entry["level"], entry["logger"]) == ("ERROR", "django.request")
    assert entry["message"] == "Internal Server Error: /api/v1/jobs/"
    assert entry["exception"].startswith("Traceback"), entry
    assert "RuntimeError: boom over http" in entry["exception"]
