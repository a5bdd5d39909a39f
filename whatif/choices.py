"""Choices of what-if replays."""

from __future__ import annotations

from django.db import models


class RunStatus(models.TextChoices):
    """Where a what-if replay is."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class Window(models.TextChoices):
    """The past window replayed."""

    DAY = "24h", "Last 24 hours"
    WEEK = "7d", "Last 7 days"
    CUSTOM = "custom", "Custom range"
