"""Platform admin dashboards."""

from __future__ import annotations

from django.urls import path

from jobs import dashboard

app_name = "dashboard"
urlpatterns = [
    path("", dashboard.ClusterDashboardView.as_view(), name="cluster"),
]
