"""Node pool and node pages."""

from __future__ import annotations

from django.urls import path

from quotas.views import nodes

app_name = "nodes"
urlpatterns = [
    path("", nodes.NodePoolListView.as_view(), name="pools"),
]
