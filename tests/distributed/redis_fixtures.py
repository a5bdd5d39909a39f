"""Fixtures for Redis faults: a Redis of the test's own that it stops and starts, the Celery
worker and beat on it, a real web process, and a websocket client that reconnects like a page.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.servers import RedisServer, free_port

from .conftest import ROOT, _celery_env

# How often the test's page retries a closed socket (live.js waits at most 2.5 s).
RETRY = 1.0


@pytest.fixture
def redis_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisServer]:
    """A Redis for this test alone; the worker, beat and web process started after it use it."""
    server = RedisServer()
    server.start()
    monkeypatch.setenv("REDIS_URL", server.url)
    yield server
    server.stop()


@pytest.fixture
def celery_on_redis(redis_server: RedisServer, request: pytest.FixtureRequest) -> None:
    """The Celery worker and beat, started once REDIS_URL names the test's Redis."""
    request.getfixturevalue("worker")
    request.getfixturevalue("beat")


@pytest.fixture
def web(redis_server: RedisServer, transactional_db: None, tmp_path: Path) -> Iterator[str]:
    """A web process as production runs it (uvicorn, console.serving); yields host:port."""
    port = free_port()
    log = tmp_path / "web.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "console.serving:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--lifespan",
            "off",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=_celery_env(),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    print(log.read_text()[-4000:])


class LiveSocket(threading.Thread):
    """A page's websocket as live.js keeps it: reopened after every close, caught up on open."""

    def __init__(self, url: str, *, origin: str, cookie: str) -> None:
        super().__init__(name="live-socket", daemon=True)
        self.url, self.origin, self.cookie = url, origin, cookie
        self.seq: int | None = None
        # (monotonic time received, whether it came before caught_up, payload)
        self.events: list[tuple[float, bool, dict[str, Any]]] = []
        self.caught_up: list[float] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        """Keep a socket open until stopped."""
        asyncio.run(self._main())

    async def _main(self) -> None:
        while not self.stopped.is_set():
            # Refused or dropped: try again, as the page does.
            with suppress(OSError, websockets.WebSocketException, TimeoutError):
                await self._listen()
            await asyncio.sleep(RETRY)

    async def _listen(self) -> None:
        async with websockets.connect(
            self.url,
            origin=websockets.Origin(self.origin),
            additional_headers={"Cookie": self.cookie},
            open_timeout=2,
        ) as socket_:
            await socket_.send(json.dumps({"after": self.seq}))
            replaying = True
            while not self.stopped.is_set():
                try:
                    text = await asyncio.wait_for(socket_.recv(), 0.2)
                except TimeoutError:
                    continue
                payload = json.loads(text)
                if payload.get("kind") in {"caught_up", "resync"}:
                    replaying = False
                    self.caught_up.append(time.monotonic())
                else:
                    self.events.append((time.monotonic(), replaying, payload))
                if payload.get("seq") is not None:
                    self.seq = max(self.seq or 0, payload["seq"])

    def names(self, kind: str) -> set[str]:
        """Names of the workloads it saw an event of this kind for."""
        return {p["name"] for _, _, p in list(self.events) if p.get("kind") == kind}

    def stop(self) -> None:
        """Close the socket and end the thread."""
        self.stopped.set()
        self.join(10)
