"""Dashboard pages, and the pages of the quotas and nodes namespaces that read workloads.

console/urls.py mounts `urlpatterns` under dashboard/ and joins `quota_urlpatterns` and
`node_urlpatterns` to quotas/urls.py and cluster/urls.py under their namespaces, so the
names (quotas:scale, nodes:grid, …) stay as they were while quotas and cluster never import
jobs.
"""

from __future__ import annotations

from django.urls import path

from dashboard.views import cluster, quotas

app_name = "dashboard"
urlpatterns = [
    path("", cluster.ClusterDashboardView.as_view(), name="cluster"),
]

quota_urlpatterns = [
    path("<int:pk>/", quotas.QuotaOverviewView.as_view(), name="overview"),
    path("<int:pk>/nodes/", quotas.QuotaNodesView.as_view(), name="nodes"),
    path("<int:pk>/jobs/", quotas.QuotaJobsView.as_view(), name="jobs"),
    path("<int:pk>/monitoring/", quotas.QuotaMonitoringView.as_view(), name="monitoring"),
    path("<int:pk>/scale/", quotas.QuotaScaleView.as_view(), name="scale"),
    path("<int:pk>/rebalance/", quotas.QuotaRebalanceView.as_view(), name="rebalance"),
]

node_urlpatterns = [
    path("grid/", cluster.NodeGridView.as_view(), name="grid"),
]
