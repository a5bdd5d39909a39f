"""Websocket consumers: live events of a workspace, a quota or the whole cluster.

Each consumer checks permission before it joins a group; a refused or anonymous connection
is closed before any event can reach it.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer

from console.permissions import is_platform_admin
from jobs.live import CLUSTER_GROUP, quota_group, workspace_group
from workspaces.models import Workspace
from workspaces.roles import VIEW

REFUSED = 4403
NOT_FOUND = 4404


class EventsConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Base: join one group once `allowed()` says so, then relay its events."""

    group: str | None = None

    async def connect(self) -> None:
        """Refuse anonymous users and anyone `allowed()` turns away."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not await self.allowed(user):
            await self.close(code=REFUSED)
            return
        self.group = self.group_name()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        """Leave the group."""
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Ignore what the browser sends: the feed is one way."""
        # Channels' JSON consumer decodes every frame: one that is not JSON, is nested
        # 100,000 deep or is binary raised here, closing the socket with a traceback.

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


class WorkspaceEventsConsumer(EventsConsumer):
    """Events of one workspace, for its members."""

    async def allowed(self, user: Any) -> bool:
        """Members (view permission on the workspace) and platform admins."""
        pk = self.scope["url_route"]["kwargs"]["workspace_id"]
        return bool(await database_sync_to_async(_may_view_workspace)(user, pk))

    def group_name(self) -> str:
        """workspace.<id>."""
        return workspace_group(self.scope["url_route"]["kwargs"]["workspace_id"])


class ClusterEventsConsumer(EventsConsumer):
    """Every event and usage sample, for platform admins' dashboards."""

    async def allowed(self, user: Any) -> bool:
        """Platform admins only."""
        return bool(await database_sync_to_async(is_platform_admin)(user))

    def group_name(self) -> str:
        """The cluster group."""
        return CLUSTER_GROUP


class QuotaEventsConsumer(ClusterEventsConsumer):
    """Events of one quota, for platform admins' quota overview."""

    def group_name(self) -> str:
        """quota.<id>."""
        return quota_group(self.scope["url_route"]["kwargs"]["quota_id"])


class UnknownPathConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]
    """Any path no route takes: closed before it is accepted."""

    async def connect(self) -> None:
        """Refuse the handshake."""
        await self.close(code=NOT_FOUND)


def _may_view_workspace(user: Any, pk: int) -> bool:
    """The user holds view permission on the workspace (platform admins hold it globally)."""
    workspace = Workspace.objects.filter(pk=pk).first()
    return workspace is not None and (is_platform_admin(user) or user.has_perm(VIEW, workspace))
