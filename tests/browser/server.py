"""The browser tests' server: the console's ASGI app under daphne, in a thread of this process.

pytest-django's live_server is a WSGI server and cannot upgrade a websocket, so live pages
would never update there. Daphne in a thread shares the in-memory channel layer and the test
database with the test. Twisted's reactor starts once per process: one server per session.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.test import override_settings


class _Daphne(threading.Thread):
    """daphne on a free port of 127.0.0.1, with static files, until the session ends."""

    def __init__(self) -> None:
        super().__init__(name="daphne-live-server", daemon=True)
        self.ready = threading.Event()
        self.port = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            from channels.routing import ProtocolTypeRouter
            from daphne.server import Server
            from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
            from django.core.asgi import get_asgi_application
            from twisted.internet import reactor

            from console.asgi import application

            app = ProtocolTypeRouter(
                {
                    "http": ASGIStaticFilesHandler(get_asgi_application()),
                    "websocket": application.application_mapping["websocket"],
                }
            )
            self.server = Server(
                application=app,
                endpoints=["tcp:port=0:interface=127.0.0.1"],
                signal_handlers=False,
                verbosity=0,
            )

            def resolve() -> None:
                if self.server.listening_addresses:
                    self.port = self.server.listening_addresses[0][1]
                    self.ready.set()
                else:
                    reactor.callLater(0.05, resolve)  # type: ignore[attr-defined]

            reactor.callLater(0.05, resolve)  # type: ignore[attr-defined]
            self.server.run()
        except BaseException as error:  # surface start-up failures in the fixture
            self.error = error
            self.ready.set()


class LiveServer:
    """What pytest-django's live_server offers that the browser fixtures use."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self._live_server_modified_settings = override_settings()


_daphne: _Daphne | None = None


def server() -> LiveServer:
    """The session's daphne server, started on first use."""
    global _daphne
    if _daphne is None:
        _daphne = _Daphne()
        _daphne.start()
        assert _daphne.ready.wait(20), "daphne did not start"
    if _daphne.error is not None:
        raise _daphne.error
    return LiveServer(_daphne.port)


def off_thread(run: Callable[[], Any]) -> Any:
    """Run control-loop code outside Playwright's event loop (async_to_sync refuses inside it)."""
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
