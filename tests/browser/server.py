"""The browser tests' server: the console's app under uvicorn, in a thread of this process.

pytest-django's live_server is a WSGI server and cannot upgrade a websocket, so live pages
would never update there. uvicorn in a thread serves what `manage.py serve` serves
(console.serving) and shares the in-memory channel layer and the test database with the test.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from django.test import override_settings


class _Uvicorn(threading.Thread):
    """uvicorn on a free port of 127.0.0.1, with static files, until the session ends."""

    def __init__(self) -> None:
        super().__init__(name="uvicorn-live-server", daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            import uvicorn

            from console.serving import application, serve

            config = uvicorn.Config(
                application(static=True),
                loop="uvloop",
                http="httptools",
                ws="websockets-sansio",
                lifespan="off",
                log_level="warning",
            )
            serve(uvicorn.Server(config), sockets=[self.sock])
        except BaseException as error:  # surface start-up failures in the fixture
            self.error = error


class LiveServer:
    """What pytest-django's live_server offers that the browser fixtures use."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self._live_server_modified_settings = override_settings()


_uvicorn: _Uvicorn | None = None


def server() -> LiveServer:
    """The session's uvicorn server, started on first use (its socket listens at once)."""
    global _uvicorn
    if _uvicorn is None:
        _uvicorn = _Uvicorn()
        _uvicorn.start()
    if _uvicorn.error is not None:
        raise _uvicorn.error
    return LiveServer(_uvicorn.port)


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
