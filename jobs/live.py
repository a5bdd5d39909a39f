"""Channels group names and the one helper that sends to them."""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import Future
from typing import Any, NamedTuple

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer

CLUSTER_GROUP = "cluster"
log = logging.getLogger(__name__)


class Message(NamedTuple):
    """A payload for the groups of a workspace and a quota (and always the cluster)."""

    workspace_id: int | None
    quota_id: int | None
    payload: dict[str, Any]


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


def broadcast_many(messages: list[Message]) -> None:
    """Send messages to their groups in one trip through the channel layer."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return

    async def send_all() -> None:
        for message in messages:
            event = {"type": "tidepool.event", "payload": message.payload}
            for group in groups_of(message):
                await layer.group_send(group, event)

    loop = _server_loop()
    if loop is None:
        async_to_sync(send_all)()
        return
    # A request's thread under the ASGI server: the sends run on the server's event loop
    # without the request waiting for a turn of that loop (async_to_sync would block on it).
    asyncio.run_coroutine_threadsafe(send_all(), loop).add_done_callback(_log_failure)


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop that handed this thread its request (asgiref's sync_to_async)."""
    if getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) != os.getpid():
        return None
    loop: asyncio.AbstractEventLoop | None = getattr(
        SyncToAsync.threadlocal, "main_event_loop", None
    )
    return loop if loop is not None and loop.is_running() else None


def _log_failure(sent: Future[None]) -> None:
    """Log a push that failed: the change it announces is committed all the same."""
    if not sent.cancelled() and sent.exception() is not None:
        log.error("live push failed", exc_info=sent.exception())


def broadcast(*, workspace_id: int | None, quota_id: int | None, payload: dict[str, Any]) -> None:
    """Send one payload to the workspace, quota and cluster groups."""
    broadcast_many([Message(workspace_id, quota_id, payload)])
