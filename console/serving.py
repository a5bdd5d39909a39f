"""The embedded console as one ASGI app: HTTP in one hop to a long-lived thread (SQLite only).

Django's own ASGIHandler runs each request's sync code in a thread made for that request
(so a new database connection per request) and hops between the event loop and that thread
for every middleware. Here the event loop only reads the request and writes the response;
Django's sync handler chain (request_started, middleware, view, request_finished) runs in
one call on a long-lived thread that keeps its SQLite connection (``CONN_MAX_AGE=None``).
The distributed mode serves ``console.asgi`` (Django's handler, PostgreSQL connections from
a pool); with the switch off (``console.fast``) the embedded mode does too.

Reads and writes have a pool each. Python runs one thread at a time (the GIL), so more
runnable threads add hand-overs, not speed: a list page of 50 cost 4.7-4.9 ms of CPU with
one or two threads at it, 5.4 ms with four and 5.9 ms with eight (medians of seven runs on
two busy cores). Two read threads let one thread's SQLite work (done without the GIL)
overlap another's Python, and keep one slow read from holding up the rest. Every POST goes
to the write pool, even one that changes nothing: a scale preview runs the scale in a
transaction it rolls back, so it too waits for the write lock. Writers wait on that lock in
their own pool, where a waiting thread is not runnable, and never take a thread a read could
use.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import import_module
from typing import Any

import uvicorn
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import HttpResponseBase
from django.urls import set_script_prefix

from console import fast
from jobs.live import sending_on
from jobs.reports.accept import Answer, report_accept, report_answer_unread
from jobs.reports.env import REPORT_PATH

Message = dict[str, Any]
# Methods that only read (RFC 9110's safe methods), answered by the read pool.
READS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class ThreadedASGIHandler(ASGIHandler):
    """Django's ASGI handler that answers each request in a single call on a worker thread."""

    def __init__(self, *, read_threads: int = 2, write_threads: int = 4) -> None:
        base.BaseHandler.__init__(self)  # ASGIHandler's would load the middleware async
        self.load_middleware(is_async=False)
        reads = ThreadPoolExecutor(read_threads, thread_name_prefix="http-read")
        writes = ThreadPoolExecutor(write_threads, thread_name_prefix="http-write")
        reports = ThreadPoolExecutor(1, thread_name_prefix="http-report")
        self.read = sync_to_async(self._respond, thread_sensitive=False, executor=reads)
        self.write = sync_to_async(self._respond, thread_sensitive=False, executor=writes)
        self.report = sync_to_async(report_accept, thread_sensitive=False, executor=reports)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Read the body here, answer in a worker thread, send the answer from here."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        try:
            body = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            if scope["path"] == REPORT_PATH and scope["method"] == "POST":
                messages = await self._report(scope, body.read())
            else:
                respond = self.read if scope["method"] in READS else self.write
                messages = await respond(scope, body)
        finally:
            body.close()
        for message in messages:
            await send(message)

    async def _report(self, scope: dict[str, Any], body: bytes) -> list[Message]:
        """A report answered here when that needs no query, else on the report thread."""
        authorization = next(
            (
                value.decode("latin1")
                for name, value in scope["headers"]
                if name == b"authorization"
            ),
            "",
        )
        answer = report_answer_unread(authorization=authorization, body=body)
        if answer is None:
            answer = await self.report(authorization=authorization, body=body)
        return _report_messages(answer)

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


def _report_messages(answer: Answer) -> list[Message]:
    """A report's answer, as its Django view sends it."""
    content = answer.content()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
    ]
    if answer.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    return [
        {"type": "http.response.start", "status": answer.status, "headers": headers},
        {"type": "http.response.body", "body": content},
    ]


def _start_message(response: HttpResponseBase) -> Message:
    """Status and headers, cookies included, as ASGIHandler.send_response sends them."""
    headers = [(name.encode("ascii"), value.encode("latin1")) for name, value in response.items()]
    headers += [
        (b"Set-Cookie", cookie.output(header="").encode("ascii").strip())
        for cookie in response.cookies.values()
    ]
    return {"type": "http.response.start", "status": response.status_code, "headers": headers}


def application(*, static: bool = False, read_threads: int = 2, write_threads: int = 4) -> Any:
    """HTTP through ThreadedASGIHandler, or with the switch off Django's (static files too
    when asked); websockets as asgi.py."""
    from channels.routing import ProtocolTypeRouter
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from console.asgi import application as console

    http: Any = console.application_mapping["http"]
    if fast.on():
        http = ThreadedASGIHandler(read_threads=read_threads, write_threads=write_threads)
    if static:
        http = ASGIStaticFilesHandler(http)
    app = ProtocolTypeRouter({"http": http, "websocket": console.application_mapping["websocket"]})
    freeze_startup_heap()
    return app


def freeze_startup_heap() -> None:
    """Load every view, then keep what start-up built out of the garbage collector's scans.

    A full collection walks every object the process holds, most of them Django, DRF and
    the URL conf: under 20 concurrent API requests that walk (~160,000 objects) stopped every
    thread for 80-140 ms every second or two. Frozen, the start-up objects are skipped
    (gc.freeze), and a full collection walks only what was made since: 7-15 ms.
    """
    import_module(settings.ROOT_URLCONF)  # every view, serializer and model, now, not later
    gc.collect()
    gc.freeze()


def serve(
    server: uvicorn.Server,
    *,
    started: Callable[[], object] = lambda: None,
    sockets: list[socket.socket] | None = None,
) -> None:
    """Run uvicorn until it exits; `started` runs once pushes from any thread reach its loop.

    The control loop's thread has no event loop: its pushes, like every request thread's,
    go through the server's loop, the one the websocket consumers wait on (jobs.live).
    """

    async def main() -> None:
        with sending_on(asyncio.get_running_loop()):
            started()
            await server.serve(sockets)

    # asyncio.Runner, not uvicorn's run(), which on Python 3.11 turns asyncio's debug mode
    # (PYTHONASYNCIODEBUG, -X dev) off.
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(main())
