"""Under `manage.py serve`, what the control loop decides reaches a watching member's socket.

The server runs in a thread of the test process, as `make demo` runs it: uvicorn, the
in-process control loop, the in-memory channel layer. Its event loop runs in asyncio's
debug mode, where a call that is not thread-safe raises instead of passing silently: the
control loop's thread once sent straight into the consumers' queues, which woke a waiting
socket only at the server's next housekeeping tick and here never.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.core.management import call_command
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token
from websockets.sync.client import ClientConnection, connect

from console import clock
from jobs.backends import set_backend
from jobs.consumers import events_of
from jobs.live import Message, broadcast_many, sending_on, workspace_group
from jobs.management.commands import serve
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def served(demo: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`manage.py serve --no-traffic` in a thread until the test ends; its host and port."""
    monkeypatch.setenv("PYTHONASYNCIODEBUG", "1")
    previous = clock.get_clock()
    port = free_port()
    command = serve.Command()

    def run() -> None:
        try:
            call_command(command, "--port", str(port), "--no-traffic")
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="serve-command")
    thread.start()
    deadline = time.monotonic() + 30
    while not getattr(getattr(command, "server", None), "started", False):
        assert thread.is_alive() and time.monotonic() < deadline, "serve did not start"
        time.sleep(0.05)
    yield f"127.0.0.1:{port}"
    command.server.should_exit = True
    thread.join(60)
    clock.set_clock(previous)
    set_backend(None)
    assert not thread.is_alive(), "serve did not stop (a consumer never woke?)"


def _watch(address: str, user: Any, workspace: Any) -> ClientConnection:
    """A signed-in member's websocket on the workspace's live events."""
    client = Client()
    client.force_login(user)
    return connect(
        f"ws://{address}/ws/workspaces/{workspace.pk}/",
        additional_headers={
            "Cookie": f"sessionid={client.cookies['sessionid'].value}",
            "Origin": "http://127.0.0.1",
        },
    )


def _submit(address: str, user: Any, name: str) -> dict[str, Any]:
    """Submit a one-GPU training job through the API, as the tidepool command does."""
    request = urllib.request.Request(
        f"http://{address}/api/v1/jobs/",
        data=json.dumps({"workspace": "workspace_b", "name": name, "gpu": 1}).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Token {Token.objects.create(user=user).key}",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201
        return dict(json.load(response))


def _events_until(socket: ClientConnection, kind: str, name: str) -> list[dict[str, Any]]:
    """The events the socket receives up to `kind` for job `name` (10 s of silence fails)."""
    events: list[dict[str, Any]] = []
    while True:
        for event in events:
            if (event.get("kind"), event.get("name")) == (kind, name):
                return events[: events.index(event) + 1]
        try:
            events += events_of(json.loads(socket.recv(timeout=10)))
        except TimeoutError:
            pytest.fail(f"no {kind} event for {name}; received {events}")


def test_bob_sees_the_control_loop_admit_his_job_live(served: str, demo: Any, bob: Any) -> None:
    with _watch(served, bob, demo.workspaces["workspace_b"]) as socket:
        job = _submit(served, bob, "pushed")
        events = _events_until(socket, "admitted", "pushed")
    admitted = events[-1]
    assert admitted["workload"] == job["id"]
    assert admitted["status"] == "Running" and admitted["in_quota"] is True
    assert [e["kind"] for e in events if e.get("name") == "pushed"][0] == "submitted"


def test_pushes_sent_while_the_server_is_busy_arrive_in_the_order_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    layer = get_channel_layer()
    send = layer.group_send
    in_flight = threading.Event()

    async def slow_first(group: str, message: dict[str, Any]) -> None:
        """Like the Redis layer, a send awaits its round trip; the first batch's is slowest."""
        if message["payloads"][0]["status"] == "Queued":
            in_flight.set()
            await asyncio.sleep(0.2)
        await send(group, message)

    monkeypatch.setattr(layer, "group_send", slow_first)
    loop = asyncio.new_event_loop()
    server = threading.Thread(target=loop.run_forever)
    server.start()

    def on_loop(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(10)

    channel = on_loop(layer.new_channel())
    on_loop(layer.group_add(workspace_group(7), channel))

    def request() -> None:
        """A request's thread (console.serving's): it sends without waiting for the loop."""
        broadcast_many([Message(7, None, {"job": "a", "status": s}) for s in ("Queued", "Running")])
        in_flight.wait(10)  # the first push is on its way when the second is sent
        broadcast_many([Message(7, None, {"job": "a", "status": "Succeeded"})])

    try:
        with sending_on(loop):
            answered = asyncio.run_coroutine_threadsafe(
                sync_to_async(request, thread_sensitive=False)(), loop
            )
            answered.result(10)
            received: list[dict[str, Any]] = []
            while len(received) < 3:
                received += on_loop(layer.receive(channel))["payloads"]
    finally:
        on_loop(layer.group_discard(workspace_group(7), channel))
        loop.call_soon_threadsafe(loop.stop)
        server.join()
        loop.close()
    assert [p["status"] for p in received] == ["Queued", "Running", "Succeeded"]
