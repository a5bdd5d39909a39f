"""The browser tests' server: the console's app under uvicorn, in a thread of this process.

pytest-django's live_server is a WSGI server and cannot upgrade a websocket, so live pages
would never update there. uvicorn in a thread serves what `manage.py serve` serves
(console.serving) and shares the in-memory channel layer and the test database with the test.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.test import override_settings


class UvicornThread(threading.Thread):
    """uvicorn on a free port of 127.0.0.1, with static files, until stopped."""

    def __init__(self) -> None:
        import uvicorn

        from console.serving import application

        super().__init__(name="uvicorn-live-server", daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
        config = uvicorn.Config(
            application(static=True),
            loop="uvloop",
            http="httptools",
            ws="websockets-sansio",
            lifespan="off",
            log_level="warning",
        )
        self.server = uvicorn.Server(config)
        self.error: BaseException | None = None

    def run(self) -> None:
        from console.serving import serve

        try:
            serve(self.server, sockets=[self.sock])
        except BaseException as error:  # surface failures in the fixture
            self.error = error

    def stop(self) -> None:
        """Let uvicorn end and wait for its thread.

        A daemon thread whose event loop still runs as the interpreter exits can crash it: a
        timer's callback (uvicorn ticks every 0.1 s) meets a finalised interpreter (SIGSEGV).
        """
        self.server.should_exit = True
        self.join(30)

    def live(self) -> LiveServer:
        """What a test reaches the server by; raises what stopped it from serving."""
        if self.error is not None:
            raise self.error
        return LiveServer(self.port)


class LiveServer:
    """What pytest-django's live_server offers that the browser fixtures use."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self._live_server_modified_settings = override_settings()


@contextmanager
def server() -> Iterator[UvicornThread]:
    """A uvicorn server in a thread (its socket listens at once), stopped on leaving."""
    thread = UvicornThread()
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()


def off_thread(run: Callable[[], Any]) -> Any:
    """Run control-loop code in a thread of its own, as the embedded runner does.

    Not in Playwright's thread, which runs an event loop (a push from there would not wait).
    """
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = run()
        except BaseException as error:
            result["error"] = error

    worker = threading.Thread(target=target)
    worker.start()
    worker.join(60)
    if "error" in result:
        raise result["error"]
    return result.get("value")
