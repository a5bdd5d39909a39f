"""App config for the dashboard: the read side across the cluster, the quota tree and jobs."""

from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """Usage charts, the node grid, and the quota pages that read workloads (no models)."""

    name = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"
