"""Template filters for showing resource amounts, durations and moments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django import template
from django.conf import settings
from django.templatetags.static import static
from django.utils import dateformat, timezone
from django.utils.html import format_html

from console.units import duration_text, milli_to_gpus

register = template.Library()


@register.filter
def gpus(milli: int | None) -> str:
    """Show milli-GPUs as a GPU count: 48000 → 48, None → ∞."""
    return milli_to_gpus(milli)


@register.filter
def cores(millicores: int | None) -> str:
    """Show millicores as cores."""
    if millicores is None:
        return "∞"
    return f"{millicores / 1000:g}"


@register.filter
def gib(mib: int | None) -> str:
    """Show MiB as GiB."""
    if mib is None:
        return "∞"
    return f"{mib / 1024:g}"


@register.filter
def get_item(mapping: dict[str, object], key: str) -> object:
    """Look a key up in a dict from a template."""
    return mapping.get(key)


@register.filter
def duration(seconds: int | None) -> str:
    """Show seconds as a person writes a duration: 7200 → 2 h, None → nothing."""
    return "" if seconds is None else duration_text(int(seconds))


# Absolute times name their zone; static/js/chrome.js rewrites them in the display zone.
WHEN_FORMATS = {"full": "Y-m-d H:i:s T", "minute": "Y-m-d H:i T", "short": "M j H:i:s T"}


@register.filter
def when(value: datetime | None, style: str = "minute") -> str:
    """A moment as <time>, in the display zone with its name: "2026-12-03 07:30 UTC"."""
    if value is None:
        return ""
    shown = dateformat.format(timezone.localtime(value), WHEN_FORMATS.get(style, style))
    return format_html('<time datetime="{}" data-when="{}">{}</time>', _iso(value), style, shown)


@register.simple_tag
def age(since: datetime | None, text: str) -> str:
    """A relative age ("12m") that ticks in the browser at the cluster clock's pace."""
    if since is None:
        return text
    return format_html(
        '<time class="age" datetime="{}" data-age title="{}">{}</time>',
        _iso(since),
        dateformat.format(timezone.localtime(since), WHEN_FORMATS["full"]),
        text,
    )


@register.simple_tag
def time_left(workload: Any, text: str) -> str:
    """An instance's time left that counts down while it runs (static before it starts)."""
    started, limit = workload.started_at, workload.max_duration
    if started is None or limit is None or workload.ended_at is not None:
        return text
    deadline = started + timedelta(seconds=limit)
    return format_html(
        '<time class="left" datetime="{}" data-left title="{}">{}</time>',
        _iso(deadline),
        dateformat.format(timezone.localtime(deadline), WHEN_FORMATS["full"]),
        text,
    )


def _iso(value: datetime) -> str:
    """The machine value of a moment: ISO 8601 in UTC."""
    return value.astimezone(UTC).isoformat()


@register.simple_tag
def plotly_script() -> str:
    """The <script> that loads plotly.js (settings.PLOTLY_BUNDLE), deferred: the page paints
    first, and the chart scripts after it (also deferred) run once it is there."""
    return format_html('<script src="{}" defer></script>', static(settings.PLOTLY_BUNDLE))


# Timeline kinds whose stored code is not a word a reader would use (jobs.choices.EventKind).
EVENT_LABELS = {"preemptor": "preempted others", "limit": "time limit"}


@register.filter
def event_label(kind: str) -> str:
    """A timeline entry's kind in words: "preemptor" → "preempted others"."""
    return EVENT_LABELS.get(kind, kind)
