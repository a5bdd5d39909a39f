"""Node pool and node pages; the node grid (it reads pods) is in dashboard/urls.py."""

from __future__ import annotations

from django.urls import path

from cluster import views as nodes

app_name = "nodes"
urlpatterns = [
    path("", nodes.NodePoolListView.as_view(), name="pools"),
    path("new/", nodes.NodePoolCreateView.as_view(), name="pool_create"),
    path("import/", nodes.NodeImportView.as_view(), name="import"),
    path("<int:pk>/", nodes.NodePoolDetailView.as_view(), name="pool"),
    path("node/<int:pk>/schedulable/", nodes.NodeSchedulableView.as_view(), name="schedulable"),
]
