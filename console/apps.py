"""App config for the project package (template tags, demo command)."""

from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """Project-wide pieces."""

    name = "console"
