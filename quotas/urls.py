"""Resource Quota pages; those that read workloads are in dashboard/urls.py's quota_urlpatterns."""

from __future__ import annotations

from django.urls import path

from quotas.views import quotas

app_name = "quotas"
urlpatterns = [
    path("", quotas.QuotaListView.as_view(), name="list"),
    path("new/", quotas.QuotaCreateView.as_view(), name="create"),
    path("<int:pk>/children/new/", quotas.QuotaChildCreateView.as_view(), name="create_child"),
    path("<int:pk>/node-pools/", quotas.QuotaNodePoolsView.as_view(), name="node_pools"),
    path(
        "<int:pk>/child-preemption/",
        quotas.QuotaChildPreemptionView.as_view(),
        name="child_preemption",
    ),
    path("<int:pk>/delete/", quotas.QuotaDeleteView.as_view(), name="delete"),
]
