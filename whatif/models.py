"""What-if replays: the window and changes asked for, the progress, and the result."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from whatif.choices import RunStatus, Window


class WhatIf(models.Model):
    """One what-if replay of a past window under proposed changes."""

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField()
    window = models.CharField(max_length=6, choices=Window.choices, default=Window.WEEK)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    changes = models.JSONField(default=list)
    status = models.CharField(max_length=8, choices=RunStatus.choices, default=RunStatus.QUEUED)
    progress = models.FloatField(default=0.0, help_text="0 to 1")
    error = models.TextField(blank=True)
    result = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"What if #{self.pk}"
