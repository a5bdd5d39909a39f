"""Template filters of the scaling-rule pages."""

from __future__ import annotations

from django import template

from console.cron import describe

register = template.Library()


@register.filter
def cron_words(expr: str) -> str:
    """A cron expression in words ("every day at 08:00"), or as written when it has none."""
    return describe(expr)
