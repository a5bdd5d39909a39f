"""The notice platform admins see on the quota pages when a calendar rule's last firing failed."""

from __future__ import annotations

from typing import Any

from django import template

from quotas.choices import CalendarOutcome
from quotas.models import CalendarRule

register = template.Library()


@register.inclusion_tag("quotas/_calendar_notice.html", takes_context=True)
def calendar_notice(context: dict[str, Any]) -> dict[str, Any]:
    """The rules whose last firing failed (one query, for platform admins only)."""
    if not context.get("is_platform_admin"):
        return {"failed": []}
    failed = CalendarRule.objects.filter(last_outcome=CalendarOutcome.FAILED).order_by(
        "-last_run_at", "name"
    )
    return {"failed": list(failed)}
