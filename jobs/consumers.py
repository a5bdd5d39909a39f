"""Websocket consumers: live events of a workspace, a quota or the whole cluster.

Each consumer checks permission before it joins a group; a refused or anonymous connection
is closed before any event can reach it. A client that missed events (it was disconnected,
Redis was down) sends `{"after": seq}` and gets the stored events of the same scope as its
group, past that seq, then `{"kind": "caught_up", "seq": newest}` (`resync` instead when too
many were missed to replay); `{"after": null}` asks for the newest seq alone.

Members re-join their group every fifth of the layer's `group_expiry`, so a member that never
left (its web process died, a mass disconnect) drops out of the group within that expiry.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import suppress
from typing import Any

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from redis.exceptions import RedisError

from console.permissions import is_platform_admin
from jobs.events import events_after, latest_seq
from jobs.live import CLUSTER_GROUP, quota_group, workspace_group
from workspaces.models import Workspace
from workspaces.roles import VIEW

log = logging.getLogger(__name__)
REFUSED = 4403
NOT_FOUND = 4404
# RFC 6455 "try again later": the channel layer failed, the client reconnects and catches up.
TRY_AGAIN = 1013
# More missed events than this are not replayed: the client refetches the page's state.
CATCH_UP_LIMIT = 200


class EventsConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Base: join one group once `allowed()` says so, then relay its events."""

    group: str | None = None
    rejoin: asyncio.Task[None] | None = None
    # The group is sent what members may read (no node of a borrowed pod): so is its replay.
    members = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve the socket; if the channel layer fails (Redis down), close it for a retry."""
        try:
            await super().__call__(scope, receive, send)
        except RedisError as error:
            log.warning("live socket closed, the channel layer failed: %s", error)
            with suppress(OSError, RuntimeError):  # the client may be gone already
                await send({"type": "websocket.close", "code": TRY_AGAIN})
        finally:
            if self.rejoin is not None:
                self.rejoin.cancel()

    async def connect(self) -> None:
        """Refuse anonymous users and anyone `allowed()` turns away."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not await self.allowed(user):
            await self.close(code=REFUSED)
            return
        self.group = self.group_name()
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.rejoin = asyncio.create_task(self.keep_joined(self.group))
        await self.accept()

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
            for payload in missed:
                await self.send_json(payload)
        await self.send_json({"kind": "caught_up", "seq": newest})

    async def tidepool_events(self, message: dict[str, Any]) -> None:
        """Relay a batch of events to the browser, one frame each; a browser gone leaves."""
        try:
            for payload in message["payloads"]:
                await self.send_json(payload)
        except OSError:
            # The server raises an OSError for a socket that closed before its disconnect
            # reached this consumer (ASGI spec); ending here would leave the channel in the
            # group, where every later push would still be queued for it.
            await self.disconnect(1006)
            raise StopConsumer from None

    async def allowed(self, user: Any) -> bool:
        """Whether this user may watch this group."""
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

    async def allowed(self, user: Any) -> bool:
        """Members (view permission on the workspace) and platform admins."""
        pk = self.scope["url_route"]["kwargs"]["workspace_id"]
        return bool(await database_sync_to_async(_may_view_workspace)(user, pk))

    def group_name(self) -> str:
        """workspace.<id>."""
        return workspace_group(self.scope["url_route"]["kwargs"]["workspace_id"])

    def events_scope(self) -> dict[str, int]:
        """Events of the workspace's workloads."""
        return {"workload__workspace_id": self.scope["url_route"]["kwargs"]["workspace_id"]}


class ClusterEventsConsumer(EventsConsumer):
    """Every event and usage sample, for platform admins' dashboards."""

    async def allowed(self, user: Any) -> bool:
        """Platform admins only."""
        return bool(await database_sync_to_async(is_platform_admin)(user))

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


def _may_view_workspace(user: Any, pk: int) -> bool:
    """The user holds view permission on the workspace (platform admins hold it globally)."""
    workspace = Workspace.objects.filter(pk=pk).first()
    return workspace is not None and (is_platform_admin(user) or user.has_perm(VIEW, workspace))
