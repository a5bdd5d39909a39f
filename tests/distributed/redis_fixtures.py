"""Fixtures for Redis faults: a Redis of the test's own that it stops and starts, the Celery
worker and beat on it (restarted if they exit, as a supervisor would), a real web process, and
a websocket client that reconnects like a page.
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
from pathlib import Path
from typing import Any

import pytest
import websockets

from jobs.consumers import events_of
from tests.servers import RedisServer, free_port

from .conftest import ROOT, _celery_env, _start, _stop

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


class Supervised(threading.Thread):
    """A Celery process started again whenever it exits, as systemd's Restart=always does.

    kombu 5.7 can end a worker when Redis dies while it acks a message (an AttributeError in
    `restore_unacked` on the closed connection); production runs workers under a supervisor.
    """

    def __init__(self, *args: str, log: Path) -> None:
        super().__init__(name=f"supervise-{args[0]}", daemon=True)
        self.args, self.log = args, log
        self.proc = _start(*args, log=log)
        self.restarts = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        """Restart the process when it exits, until stopped."""
        while not self.stopped.wait(0.5):
            if self.proc.poll() is not None:
                self.restarts += 1
                print(f"{self.args[0]} exited; restarting:\n{self.log.read_text()[-2000:]}")
                self.log = self.log.with_suffix(f".{self.restarts}.log")
                self.proc = _start(*self.args, log=self.log)

    def stop(self) -> None:
        """Stop supervising, then stop the process."""
        self.stopped.set()
        self.join(5)
        _stop(self.proc, self.log)


@pytest.fixture
def celery_on_redis(
    redis_server: RedisServer, transactional_db: None, tmp_path: Path
) -> Iterator[list[Supervised]]:
    """A Celery worker and beat on the test's Redis (the options of conftest's fixtures)."""
    worker = Supervised(
        "worker",
        "--pool=solo",
        "--loglevel=INFO",
        "--without-heartbeat",
        "--without-mingle",
        "--without-gossip",
        log=tmp_path / "worker.log",
    )
    beat = Supervised(
        "beat",
        "--loglevel=INFO",
        "--max-interval=1",
        "--scheduler=django_celery_beat.schedulers:DatabaseScheduler",
        log=tmp_path / "beat.log",
    )
    processes = [worker, beat]
    for process in processes:
        process.start()
    yield processes
    for process in processes:
        process.stop()


@pytest.fixture
def web(redis_server: RedisServer, transactional_db: None, tmp_path: Path) -> Iterator[str]:
    """A web process as production runs it (uvicorn on console.asgi); yields host:port."""
    port = free_port()
    log = tmp_path / "web.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "console.asgi:application",
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
    deadline = time.monotonic() + 90  # two busy cores start four processes at once
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"the web process did not start:\n{log.read_text()[-4000:]}")
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
        self.opened: list[float] = []
        # When each attempt that was refused or dropped had started.
        self.refused: list[float] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        """Keep a socket open until stopped."""
        asyncio.run(self._main())

    async def _main(self) -> None:
        while not self.stopped.is_set():
            started = time.monotonic()
            try:
                await self._listen()
            except (OSError, websockets.WebSocketException, TimeoutError):
                self.refused.append(started)  # refused or dropped: try again, as the page does
            await asyncio.sleep(RETRY)

    async def _listen(self) -> None:
        async with websockets.connect(
            self.url,
            origin=websockets.Origin(self.origin),
            additional_headers={"Cookie": self.cookie},
            open_timeout=2,
        ) as socket_:
            self.opened.append(time.monotonic())
            await socket_.send(json.dumps({"after": self.seq}))
            replaying = True
            while not self.stopped.is_set():
                try:
                    text = await asyncio.wait_for(socket_.recv(), 0.2)
                except TimeoutError:
                    continue
                for payload in events_of(json.loads(text)):
                    if payload.get("kind") in {"caught_up", "resync"}:
                        replaying = False
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
