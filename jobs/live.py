"""Channels group names and the one helper that sends to them."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

CLUSTER_GROUP = "cluster"


def workspace_group(workspace_id: int) -> str:
    """The group of one workspace's members."""
    return f"workspace.{workspace_id}"


def quota_group(quota_id: int) -> str:
    """The group of one quota's watchers (platform admins)."""
    return f"quota.{quota_id}"


def broadcast(*, workspace_id: int | None, quota_id: int | None, payload: dict[str, Any]) -> None:
    """Send a payload to the workspace, quota and cluster groups."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "tidepool.event", "payload": payload}
    groups = [CLUSTER_GROUP]
    if workspace_id is not None:
        groups.append(workspace_group(workspace_id))
    if quota_id is not None:
        groups.append(quota_group(quota_id))
    send = async_to_sync(layer.group_send)
    for group in groups:
        send(group, message)
