"""Websocket consumers: live events of a workspace, a quota or the whole cluster.

Each consumer builds the user's Access (workspaces.access) in `connect` and checks it before
it joins a group; a refused or anonymous connection is closed before any event can reach it.
A client that missed events (it was disconnected, Redis was down) sends `{"after": seq}` and
gets the stored events of the same scope as its group, past that seq, then
`{"kind": "caught_up", "seq": newest}` (`resync` instead when too many were missed to replay);
`{"after": null}` asks for the newest seq alone.

Members re-join their group every fifth of the layer's `group_expiry`, so a member that never
left (its web process died, a mass disconnect) drops out of the group within that expiry.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import suppress
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from redis.exceptions import RedisError

from console import metrics
from jobs.events import events_after, latest_seq
from jobs.live import CLUSTER_GROUP, quota_group, workspace_group
from workspaces.access import Access
from workspaces.models import Workspace
from workspaces.roles import VIEW

log = logging.getLogger(__name__)
REFUSED = 4403
NOT_FOUND = 4404
# RFC 6455 "try again later": the channel layer failed, the client reconnects and catches up.
TRY_AGAIN = 1013
# A socket sends at most one frame of live events per this many seconds (see tidepool_events).
FRAME_SECONDS = 0.05
# More missed events than this are not replayed: the client refetches the page's state.
CATCH_UP_LIMIT = 200


def frame(events: list[dict[str, Any]]) -> dict[str, Any]:
    """One websocket frame for a batch: the event itself, or `{"kind": "batch", "events"}`.

    A burst of submits or a cycle's hundreds of events reach each socket as one frame per
    push instead of one per event: sent one by one, 300 pages watching 5,000 submits were
    2,000,000 frames, far more than two web processes could write.
    """
    return events[0] if len(events) == 1 else {"kind": "batch", "events": events}


def events_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The events one frame carries (as the pages' scripts read it)."""
    events: list[dict[str, Any]] = (
        message["events"] if message.get("kind") == "batch" else [message]
    )
    return events


class EventsConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Base: join one group once `allowed()` says so, then relay its events."""

    group: str | None = None
    rejoin: asyncio.Task[None] | None = None
    # Events waiting for this socket's next frame, and the task that will send it.
    outbox: list[dict[str, Any]]
    sender: asyncio.Task[None] | None = None
    # The group is sent what members may read (no node of a borrowed pod): so is its replay.
    members = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outbox = []
        self.counted = False  # in tidepool_websocket_connections

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve the socket; if the channel layer fails (Redis down), close it for a retry."""
        try:
            await super().__call__(scope, receive, send)
        except RedisError as error:
            log.warning("live socket closed, the channel layer failed: %s", error)
            with suppress(OSError, RuntimeError):  # the client may be gone already
                await send({"type": "websocket.close", "code": TRY_AGAIN})
        finally:
            for task in (self.rejoin, self.sender):
                if task is not None:
                    task.cancel()
            if self.counted:
                metrics.WEBSOCKETS.dec()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Run the message's handler, without Channels' hop to a thread before each one.

        Channels closes stale database connections before every message, in the one thread
        that also runs every consumer's database work: under a burst each push waited there
        once per socket, and events reached pages seconds late. Relaying an event uses no
        database; the handlers that do (connect, catch-up) go through database_sync_to_async,
        which closes them itself.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        """Build the user's Access; refuse anonymous users and anyone `allowed()` turns away."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=REFUSED)
            return
        access = Access(user)
        if not await database_sync_to_async(self.allowed)(access):
            await self.close(code=REFUSED)
            return
        self.group = self.group_name()
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.rejoin = asyncio.create_task(self.keep_joined(self.group))
        await self.accept()
        self.counted = True
        metrics.WEBSOCKETS.inc()

    async def disconnect(self, code: int) -> None:
        """Leave the group."""
        if self.rejoin is not None:
            self.rejoin.cancel()
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def keep_joined(self, group: str) -> None:
        """Re-join the group well within its expiry, so that only dead members expire."""
        every = getattr(self.channel_layer, "group_expiry", 86400) / 5
        while True:
            await asyncio.sleep(every)
            # If Redis is down, this socket's own receive fails as well and closes it.
            with suppress(RedisError):
                await self.channel_layer.group_add(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: Any = None) -> None:
        """Answer `{"after": seq}` or `{"after": null}`; ignore anything else."""
        try:
            after = json.loads(text_data or "")["after"]
        except (ValueError, TypeError, KeyError, RecursionError):
            return
        if after is None or (type(after) is int and 0 <= after < 2**63):
            await self.catch_up(after)

    async def catch_up(self, after: int | None) -> None:
        """Send the stored events of this group's scope past `after`, then the newest seq."""
        newest = await database_sync_to_async(latest_seq)()
        if after is not None:
            missed = await database_sync_to_async(events_after)(
                after, limit=CATCH_UP_LIMIT, members=self.members, **self.events_scope()
            )
            if missed is None:
                await self.send_json({"kind": "resync", "seq": newest})
                return
            if missed:
                await self.send_json(frame(missed))
        await self.send_json({"kind": "caught_up", "seq": newest})

    async def tidepool_events(self, message: dict[str, Any]) -> None:
        """Queue a batch of events for the browser; they leave in the socket's next frame.

        Every push reaches every socket of its group, so under a burst of submits a page got
        a frame per submit, and the web process fell seconds behind writing them. A socket
        instead sends at most one frame per FRAME_SECONDS, holding all that came meanwhile.
        """
        self.outbox.extend(message["payloads"])
        if self.sender is None:
            self.sender = asyncio.create_task(self._send_soon())

    async def _send_soon(self) -> None:
        """Send what the outbox holds after FRAME_SECONDS, until it stays empty."""
        while self.outbox:
            await asyncio.sleep(FRAME_SECONDS)
            events, self.outbox = self.outbox, []
            try:
                await self.send_json(frame(events))
            except OSError:
                # The server raises an OSError for a socket that closed before its disconnect
                # reached this consumer (ASGI spec): leave the group now, or every later push
                # would still be queued for it, and end the consumer through its own channel.
                self.sender = None
                await self.disconnect(1006)
                await self.channel_layer.send(self.channel_name, {"type": "tidepool.gone"})
                return
        self.sender = None

    async def tidepool_gone(self, message: dict[str, Any]) -> None:
        """The browser has gone: end the consumer."""
        raise StopConsumer

    def allowed(self, access: Access) -> bool:
        """Whether the user's access lets them watch this group (may read the database)."""
        raise NotImplementedError

    def group_name(self) -> str:
        """The group to join."""
        raise NotImplementedError

    def events_scope(self) -> dict[str, int]:
        """The stored events this group is sent (filters on WorkloadEvent)."""
        raise NotImplementedError


class WorkspaceEventsConsumer(EventsConsumer):
    """Events of one workspace, for its members (platform admins on its pages read the same)."""

    members = True

    def allowed(self, access: Access) -> bool:
        """Who may view the workspace (members, platform admins), if it exists."""
        pk = self.scope["url_route"]["kwargs"]["workspace_id"]
        return access.has_perm(VIEW, pk) and Workspace.objects.filter(pk=pk).exists()

    def group_name(self) -> str:
        """workspace.<id>."""
        return workspace_group(self.scope["url_route"]["kwargs"]["workspace_id"])

    def events_scope(self) -> dict[str, int]:
        """Events of the workspace's workloads."""
        return {"workload__workspace_id": self.scope["url_route"]["kwargs"]["workspace_id"]}


class ClusterEventsConsumer(EventsConsumer):
    """Every event and usage sample, for platform admins' dashboards."""

    def allowed(self, access: Access) -> bool:
        """Platform admins only."""
        return access.platform_admin

    def group_name(self) -> str:
        """The cluster group."""
        return CLUSTER_GROUP

    def events_scope(self) -> dict[str, int]:
        """Every event."""
        return {}


class QuotaEventsConsumer(ClusterEventsConsumer):
    """Events of one quota, for platform admins' quota overview."""

    def group_name(self) -> str:
        """quota.<id>."""
        return quota_group(self.scope["url_route"]["kwargs"]["quota_id"])

    def events_scope(self) -> dict[str, int]:
        """Events of the quota's workloads."""
        return {"workload__quota_id": self.scope["url_route"]["kwargs"]["quota_id"]}


class UnknownPathConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]
    """Any path no route takes: closed before it is accepted."""

    async def connect(self) -> None:
        """Refuse the handshake."""
        await self.close(code=NOT_FOUND)
