"""Choices for the workspaces app."""

from __future__ import annotations

from django.db import models


class Role(models.TextChoices):
    """A member's role in a workspace."""

    ADMIN = "admin", "Workspace admin"
    DEVELOPER = "developer", "Developer"
    OPERATOR = "operator", "Operator"
    VIEWER = "viewer", "Viewer"
