"""App config for the quota tree."""

from __future__ import annotations

from django.apps import AppConfig


class QuotasConfig(AppConfig):
    """The quota tree and its audit log."""

    name = "quotas"
    default_auto_field = "django.db.models.BigAutoField"
