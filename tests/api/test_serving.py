"""The served app (console.serving) answers as Django does, each request in one worker thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import plotly
import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core.signals import request_finished, request_started
from django.db import connection
from rest_framework.authtoken.models import Token

from console.fast.sqlite import base
from console.serving import ThreadedASGIHandler, application

from .locks import WatchedLock, queued_writers

pytestmark = pytest.mark.django_db(transaction=True)


def _call(app: Any, method: str, path: str, body: bytes = b"", **headers: str) -> dict[str, Any]:
    """One request through the ASGI app; the response as status, headers and body."""
    communicator = ApplicationCommunicator(
        app,
        {
            "type": "http",
            "http_version": "1.1",
            "method": method,
            "path": path.split("?")[0],
            "query_string": path.partition("?")[2].encode(),
            "headers": [
                (b"content-length", str(len(body)).encode()),
                *((k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()),
            ],
        },
    )

    async def exchange() -> dict[str, Any]:
        await communicator.send_input({"type": "http.request", "body": body})
        start = await communicator.receive_output(30)
        parts = [start]
        while parts[-1].get("more_body", parts[-1] is start):
            parts.append(await communicator.receive_output(30))
        content = b"".join(part.get("body", b"") for part in parts[1:])
        return {"status": start["status"], "headers": start["headers"], "body": content}

    return async_to_sync(exchange)()


def test_a_submit_and_a_list_answer_as_the_test_client_does(demo: Any, bob: Any) -> None:
    token = Token.objects.create(user=bob).key
    app = application()
    job = b'{"workspace": "workspace_b", "name": "served", "gpu": 1}'
    headers = {"host": "127.0.0.1", "authorization": f"Token {token}"}
    created = _call(app, "POST", "/api/v1/jobs/", job, content_type="application/json", **headers)
    assert created["status"] == 201, created["body"]
    path = "/api/v1/jobs/?workspace=workspace_b"
    served = _call(app, "GET", path, **headers)
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    expected = client.get(path)
    assert served["status"] == 200
    assert served["body"] == expected.content
    assert b"served" in served["body"]
    assert (b"Content-Type", b"application/json") in served["headers"]


def test_signing_in_sets_the_session_cookie(demo: Any) -> None:
    from console.demo import PASSWORDS

    form = f"username=bob&password={PASSWORDS['bob']}".encode()
    app = application()
    login = _call(app, "GET", "/login/", host="127.0.0.1")
    csrf = next(v for k, v in login["headers"] if k == b"Set-Cookie" and v.startswith(b"csrf"))
    cookie = csrf.split(b";")[0].decode()
    token = cookie.split("=", 1)[1]
    answer = _call(
        app,
        "POST",
        "/login/",
        body=form + f"&csrfmiddlewaretoken={token}".encode(),
        host="127.0.0.1",
        cookie=cookie,
        content_type="application/x-www-form-urlencoded",
    )
    assert answer["status"] == 302
    assert any(k == b"Set-Cookie" and v.startswith(b"sessionid=") for k, v in answer["headers"])


def test_static_files_are_served_when_asked() -> None:
    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    path = "/static/plotly/plotly.min.js"
    assert _call(application(), "GET", path, host="127.0.0.1")["status"] == 404
    answer = _call(application(static=True), "GET", path, host="127.0.0.1")
    assert answer["status"] == 200
    assert answer["body"] == plotly_js.read_bytes()


def test_a_request_runs_in_one_worker_thread_that_keeps_its_connection(demo: Any, bob: Any) -> None:
    """request_started, the view and request_finished share a thread, so its connection lives."""
    auth = f"Token {Token.objects.create(user=bob).key}"
    seen: list[tuple[str, str, int]] = []

    def started(**kwargs: Any) -> None:
        seen.append(("started", threading.current_thread().name, 0))

    def finished(**kwargs: Any) -> None:
        seen.append(("finished", threading.current_thread().name, id(connection.connection)))

    request_started.connect(started)
    request_finished.connect(finished)
    try:
        app = ThreadedASGIHandler(read_threads=1)
        for _ in range(2):
            answer = _call(app, "GET", "/api/v1/jobs/", host="127.0.0.1", authorization=auth)
            assert answer["status"] == 200
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    threads = {name for _, name, _ in seen}
    assert len(seen) == 4 and len(threads) == 1
    assert threads.pop().startswith("http")
    # The view queried, and request_finished left the same open connection both times.
    connections = {conn for kind, _, conn in seen if kind == "finished"}
    assert len(connections) == 1 and id(None) not in connections


@queued_writers
def test_reads_answer_while_a_submit_waits_for_the_write_lock(
    demo: Any, bob: Any, monkeypatch: Any
) -> None:
    """A writer queued behind the lock's holder (the control loop, say) holds up no read."""
    lock = WatchedLock()
    monkeypatch.setattr(base, "_writer", lock)
    headers = {"host": "127.0.0.1", "authorization": f"Token {Token.objects.create(user=bob).key}"}
    app = ThreadedASGIHandler(read_threads=1, write_threads=1)
    job = b'{"workspace": "workspace_b", "name": "queued", "gpu": 1}'
    submitted: dict[str, Any] = {}

    def submit() -> None:
        submitted.update(
            _call(app, "POST", "/api/v1/jobs/", job, content_type="application/json", **headers)
        )

    lock.acquire()
    writer = threading.Thread(target=submit)
    writer.start()
    try:
        assert lock.waiting.wait(20), "the submit never queued for the write lock"
        listed = _call(app, "GET", "/api/v1/jobs/?workspace=workspace_b", **headers)
        assert listed["status"] == 200
        assert not submitted, "the read waited for the submit"
    finally:
        lock.release()
        writer.join(30)
    assert submitted["status"] == 201, submitted["body"]
