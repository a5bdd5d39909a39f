"""The console as one ASGI app: HTTP in one hop to a long-lived thread, websockets by Channels.

Django's own ASGIHandler runs each request's sync code in a thread made for that request
(so a new database connection per request) and hops between the event loop and that thread
for every middleware. Here the event loop only reads the request and writes the response;
Django's sync handler chain (request_started, middleware, view, request_finished) runs in
one call on a pool of long-lived threads, each keeping its database connection
(``CONN_MAX_AGE``). Views are sync, so they lose nothing; a slow request (one waiting on
SQLite's write lock) holds one thread while the others keep answering.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import HttpResponseBase
from django.urls import set_script_prefix

Message = dict[str, Any]


class ThreadedASGIHandler(ASGIHandler):
    """Django's ASGI handler that answers each request in a single call on a worker thread."""

    def __init__(self, *, threads: int = 8) -> None:
        base.BaseHandler.__init__(self)  # ASGIHandler's would load the middleware async
        self.load_middleware(is_async=False)
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="http")
        self.respond = sync_to_async(self._respond, thread_sensitive=False, executor=self.pool)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Read the body here, answer in a worker thread, send the answer from here."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        try:
            body = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            messages = await self.respond(scope, body)
        finally:
            body.close()
        for message in messages:
            await send(message)

    def _respond(self, scope: dict[str, Any], body: Any) -> list[Message]:
        """Run the sync handler chain; the messages that answer."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, refused = self.create_request(scope, body)
        response: Any = refused if request is None else self.get_response(request)
        try:
            # No view streams (static files take ASGIStaticFilesHandler's own path): a
            # streaming response is read whole here, where its iterator may touch the database.
            content = b"".join(response) if response.streaming else response.content
            return [_start_message(response), {"type": "http.response.body", "body": content}]
        finally:
            response.close()  # request_finished, in the thread that ran the request


def _start_message(response: HttpResponseBase) -> Message:
    """Status and headers, cookies included, as ASGIHandler.send_response sends them."""
    headers = [(name.encode("ascii"), value.encode("latin1")) for name, value in response.items()]
    headers += [
        (b"Set-Cookie", cookie.output(header="").encode("ascii").strip())
        for cookie in response.cookies.values()
    ]
    return {"type": "http.response.start", "status": response.status_code, "headers": headers}


def application(*, static: bool = False, threads: int = 8) -> Any:
    """HTTP through ThreadedASGIHandler (static files too when asked), websockets as asgi.py."""
    from channels.routing import ProtocolTypeRouter
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from console.asgi import application as console

    http: Any = ThreadedASGIHandler(threads=threads)
    if static:
        http = ASGIStaticFilesHandler(http)
    return ProtocolTypeRouter({"http": http, "websocket": console.application_mapping["websocket"]})
