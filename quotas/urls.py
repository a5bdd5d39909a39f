"""Resource Quota pages."""

from __future__ import annotations

from django.urls import path

from quotas.views import quotas

app_name = "quotas"
urlpatterns = [
    path("", quotas.QuotaListView.as_view(), name="list"),
    path("new/", quotas.QuotaCreateView.as_view(), name="create"),
    path("<int:pk>/", quotas.QuotaOverviewView.as_view(), name="overview"),
    path("<int:pk>/nodes/", quotas.QuotaNodesView.as_view(), name="nodes"),
    path("<int:pk>/jobs/", quotas.QuotaJobsView.as_view(), name="jobs"),
    path("<int:pk>/monitoring/", quotas.QuotaMonitoringView.as_view(), name="monitoring"),
    path("<int:pk>/children/new/", quotas.QuotaChildCreateView.as_view(), name="create_child"),
    path("<int:pk>/scale/", quotas.QuotaScaleView.as_view(), name="scale"),
    path("<int:pk>/node-pools/", quotas.QuotaNodePoolsView.as_view(), name="node_pools"),
    path("<int:pk>/rebalance/", quotas.QuotaRebalanceView.as_view(), name="rebalance"),
    path(
        "<int:pk>/child-preemption/",
        quotas.QuotaChildPreemptionView.as_view(),
        name="child_preemption",
    ),
    path("<int:pk>/delete/", quotas.QuotaDeleteView.as_view(), name="delete"),
]
