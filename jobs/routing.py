"""Websocket routes; any other path is closed cleanly rather than raising in the router."""

from __future__ import annotations

from django.urls import path, re_path, register_converter
from django.urls.converters import IntConverter

from console.api import ID_REGEX
from jobs import consumers


class IdConverter(IntConverter):
    """A primary key: digits that fit a 64-bit integer, as the API's URLs take them."""

    regex = ID_REGEX


register_converter(IdConverter, "id")

websocket_urlpatterns = [
    path("ws/workspaces/<id:workspace_id>/", consumers.WorkspaceEventsConsumer.as_asgi()),
    path("ws/quotas/<id:quota_id>/", consumers.QuotaEventsConsumer.as_asgi()),
    path("ws/cluster/", consumers.ClusterEventsConsumer.as_asgi()),
    # Last: Channels' router raises ValueError (a traceback, a 500 handshake) for no match.
    re_path(r"", consumers.UnknownPathConsumer.as_asgi()),
]
