"""The what-if app."""

from __future__ import annotations

from django.apps import AppConfig


class WhatIfConfig(AppConfig):
    """Replays of recorded windows under proposed changes."""

    name = "whatif"
    verbose_name = "What if"
    default_auto_field = "django.db.models.BigAutoField"
