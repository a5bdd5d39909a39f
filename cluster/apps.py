"""App config for the cluster: resource pools, node pools, nodes and the write lock."""

from __future__ import annotations

from django.apps import AppConfig


class ClusterConfig(AppConfig):
    """Resource pools, node pools, nodes and the scheduling state's write lock."""

    name = "cluster"
    default_auto_field = "django.db.models.BigAutoField"
