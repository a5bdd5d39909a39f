"""App config for workloads, the control loop and the cluster backends."""

from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Training jobs, inference services, interactive instances."""

    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"
