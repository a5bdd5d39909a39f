"""Dashboard pages, and the pages of the quotas and nodes namespaces that read workloads.

console/urls.py mounts `urlpatterns` under dashboard/ and joins `quota_urlpatterns` and
`node_urlpatterns` to quotas/urls.py and cluster/urls.py under their namespaces, and
`workspace_urlpatterns` to workspaces/urls.py, so the names (quotas:scale, nodes:grid,
workspaces:quota, …) stay in their namespaces while quotas, cluster and workspaces never
import what reads workloads here.
"""

from __future__ import annotations

from django.urls import path

from dashboard.views import calendar, cluster, quota_usage, quotas

app_name = "dashboard"
urlpatterns = [
    path("", cluster.ClusterDashboardView.as_view(), name="cluster"),
]

quota_urlpatterns = [
    path("", quota_usage.QuotaTreeView.as_view(), name="list"),
    path("new/", quota_usage.QuotaAddView.as_view(), name="create"),
    path("<int:pk>/children/new/", quota_usage.QuotaChildAddView.as_view(), name="create_child"),
    path("<int:pk>/", quotas.QuotaOverviewView.as_view(), name="overview"),
    path("<int:pk>/nodes/", quotas.QuotaNodesView.as_view(), name="nodes"),
    path("<int:pk>/jobs/", quotas.QuotaJobsView.as_view(), name="jobs"),
    path("<int:pk>/monitoring/", quotas.QuotaMonitoringView.as_view(), name="monitoring"),
    path("<int:pk>/scale/", quotas.QuotaScaleView.as_view(), name="scale"),
    path("<int:pk>/rebalance/", quotas.QuotaRebalanceView.as_view(), name="rebalance"),
    path("calendar/", calendar.CalendarListView.as_view(), name="calendar"),
    path("<int:pk>/calendar/", calendar.CalendarListView.as_view(), name="quota_calendar"),
    path("calendar/new/", calendar.CalendarRuleCreateView.as_view(), name="calendar_create"),
    path("calendar/<int:pk>/", calendar.CalendarRuleView.as_view(), name="calendar_rule"),
    path(
        "calendar/<int:pk>/delete/",
        calendar.CalendarRuleDeleteView.as_view(),
        name="calendar_delete",
    ),
]

# Joined to workspaces/urls.py under the workspaces namespace: a member's view of a bound quota.
workspace_urlpatterns = [
    path("<slug:name>/quotas/<int:quota_id>/", quota_usage.MemberQuotaView.as_view(), name="quota"),
]

node_urlpatterns = [
    path("grid/", cluster.NodeGridView.as_view(), name="grid"),
]
