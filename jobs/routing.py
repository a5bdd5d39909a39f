"""Websocket routes."""

from __future__ import annotations

from django.urls import path

from jobs import consumers

websocket_urlpatterns = [
    path("ws/workspaces/<int:workspace_id>/", consumers.WorkspaceEventsConsumer.as_asgi()),
    path("ws/quotas/<int:quota_id>/", consumers.QuotaEventsConsumer.as_asgi()),
    path("ws/cluster/", consumers.ClusterEventsConsumer.as_asgi()),
]
