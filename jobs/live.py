"""Channels group names and the one helper that sends to them."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import Future, wait
from contextlib import contextmanager
from typing import Any, NamedTuple

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import BaseChannelLayer, get_channel_layer

CLUSTER_GROUP = "cluster"
log = logging.getLogger(__name__)
# The event loop of the server in this process (console.serving.serve).
_serving: asyncio.AbstractEventLoop | None = None
# How long a thread outside the server (the control loop) waits for its push to be sent.
SEND_WAIT = 5.0


class Message(NamedTuple):
    """A payload for the groups of a workspace and a quota (and always the cluster).

    `withheld` names payload keys the workspace group is not sent: its members may not read
    them (a borrowed placement's nodes, `jobs.visibility`); the cluster and quota groups,
    platform admins only, get the payload whole.
    """

    workspace_id: int | None
    quota_id: int | None
    payload: dict[str, Any]
    withheld: frozenset[str] = frozenset()

    def for_workspace(self) -> dict[str, Any]:
        """The payload as the workspace group is sent it."""
        if not self.withheld:
            return self.payload
        return {k: v for k, v in self.payload.items() if k not in self.withheld}


def workspace_group(workspace_id: int) -> str:
    """The group of one workspace's members."""
    return f"workspace.{workspace_id}"


def quota_group(quota_id: int) -> str:
    """The group of one quota's watchers (platform admins)."""
    return f"quota.{quota_id}"


def groups_of(message: Message) -> list[str]:
    """The cluster group, the workspace's and the quota's."""
    groups = [CLUSTER_GROUP]
    if message.workspace_id is not None:
        groups.append(workspace_group(message.workspace_id))
    if message.quota_id is not None:
        groups.append(quota_group(message.quota_id))
    return groups


@contextmanager
def sending_on(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """While the server runs on `loop`, every thread's pushes go through that loop.

    The in-memory channel layer's queues belong to the loop its consumers wait on and are
    not thread-safe: a send from another thread or loop wakes a waiting consumer only when
    something else next wakes that loop, and can race its bookkeeping.
    """
    global _serving
    previous, _serving = _serving, loop
    try:
        yield
    finally:
        _serving = previous


def broadcast_many(messages: list[Message]) -> None:
    """Send messages to their groups in one trip through the channel layer, in order."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return
    loop = _server_loop()
    if loop is None:
        # No event loop serves in this process (a Celery worker, a management command): the
        # send runs on a loop of its own, which the Redis layer allows.
        async_to_sync(_send)(layer, messages)
        return
    sent = _outbox(loop).post(layer, messages)
    sent.add_done_callback(_log_failure)
    if _request_loop() is None and not _in_event_loop():
        # The control loop waits for its push to be sent, as it did on a loop of its own:
        # pushes piling up on the server's loop reach a socket in bursts, and a channel holds
        # a bounded number of messages. A request's thread answers without waiting.
        wait([sent], timeout=SEND_WAIT)


class _Outbox:
    """The pushes waiting for a loop's one sender, which takes all that wait at each turn.

    One sender keeps the pushes of every thread in the order they were posted. While it
    sends, more pile up and leave together in its next trip, one group_send per group: under
    a burst of submits each socket gets a message per trip instead of one per submit.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: list[tuple[list[Message], Future[None]]] = []
        self.sending = False
        self.guard = threading.Lock()

    def post(self, layer: BaseChannelLayer, messages: list[Message]) -> Future[None]:
        """Queue messages; the future is done once they are sent."""
        sent: Future[None] = Future()
        with self.guard:
            self.waiting.append((messages, sent))
            start, self.sending = not self.sending, True
        if start:
            asyncio.run_coroutine_threadsafe(self._send_all(layer), self.loop)
        return sent

    async def _send_all(self, layer: BaseChannelLayer) -> None:
        """Send what waits, trip after trip, until nothing does."""
        while True:
            with self.guard:
                batch, self.waiting = self.waiting, []
                if not batch:
                    self.sending = False
                    return
            try:
                await _send(layer, [m for messages, _ in batch for m in messages])
            except Exception as error:  # each poster's future reports it
                for _, sent in batch:
                    sent.set_exception(error)
            else:
                for _, sent in batch:
                    sent.set_result(None)


_outboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Outbox] = (
    weakref.WeakKeyDictionary()
)
_outboxes_guard = threading.Lock()


def _outbox(loop: asyncio.AbstractEventLoop) -> _Outbox:
    """The loop's outbox."""
    with _outboxes_guard:
        box = _outboxes.get(loop)
        if box is None:
            box = _outboxes[loop] = _Outbox(loop)
        return box


async def _send(layer: BaseChannelLayer, messages: list[Message]) -> None:
    """One channel message per group with that group's payloads, in order.

    A channel holds a bounded number of messages (100 by default) and drops the rest: a
    cycle's hundreds of events sent one by one would overflow the cluster group's watchers.
    """
    batches: dict[str, list[dict[str, Any]]] = {}
    for message in messages:
        members = None if message.workspace_id is None else workspace_group(message.workspace_id)
        for group in groups_of(message):
            payload = message.for_workspace() if group == members else message.payload
            batches.setdefault(group, []).append(payload)
    for group, payloads in batches.items():
        await layer.group_send(group, {"type": "tidepool.events", "payloads": payloads})


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The running loop whose consumers the channel layer serves in this process, if any.

    The server's (sending_on), whichever thread sends; without one, the loop that handed
    this thread its request, as under another ASGI server.
    """
    if _serving is not None and _serving.is_running():
        return _serving
    return _request_loop()


def _request_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop that handed this thread its request (asgiref's sync_to_async)."""
    if getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) != os.getpid():
        return None
    loop: asyncio.AbstractEventLoop | None = getattr(
        SyncToAsync.threadlocal, "main_event_loop", None
    )
    return loop if loop is not None and loop.is_running() else None


def _in_event_loop() -> bool:
    """This thread runs an event loop (where waiting for one would block it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _log_failure(sent: Future[None]) -> None:
    """Log a push that failed: the change it announces is committed all the same."""
    if not sent.cancelled() and sent.exception() is not None:
        log.error("live push failed", exc_info=sent.exception())


def broadcast(*, workspace_id: int | None, quota_id: int | None, payload: dict[str, Any]) -> None:
    """Send one payload to the workspace, quota and cluster groups."""
    broadcast_many([Message(workspace_id, quota_id, payload)])
