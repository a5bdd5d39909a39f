"""Resource Quota pages; those that read workloads are in dashboard/urls.py's quota_urlpatterns
(the tree with its usage, and the Add forms with their headroom among them)."""

from __future__ import annotations

from django.urls import path

from quotas.views import quotas

app_name = "quotas"
urlpatterns = [
    path("<int:pk>/settings/", quotas.QuotaSettingsView.as_view(), name="settings"),
    path("<int:pk>/node-pools/", quotas.QuotaNodePoolsView.as_view(), name="node_pools"),
    path(
        "<int:pk>/child-preemption/",
        quotas.QuotaChildPreemptionView.as_view(),
        name="child_preemption",
    ),
    path("<int:pk>/delete/", quotas.QuotaDeleteView.as_view(), name="delete"),
]
