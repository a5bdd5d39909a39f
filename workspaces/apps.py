"""App config for workspaces, memberships and resource-usage rules."""

from __future__ import annotations

from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    """Team workspaces."""

    name = "workspaces"
    default_auto_field = "django.db.models.BigAutoField"
