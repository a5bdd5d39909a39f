"""Template filters for showing resource amounts and durations."""

from __future__ import annotations

from django import template

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
