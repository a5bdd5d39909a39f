"""App config for resource pools, node pools, nodes and the quota tree."""

from __future__ import annotations

from django.apps import AppConfig


class QuotasConfig(AppConfig):
    """Resource pools, node pools, nodes and quotas."""

    name = "quotas"
    default_auto_field = "django.db.models.BigAutoField"
