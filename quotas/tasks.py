"""Thin, idempotent tasks of the quota calendar: beat runs each rule's crontab entry, the
embedded runner sweeps due rules on jobs.tasks.SCHEDULE's interval."""

from __future__ import annotations

from celery import shared_task

from console import clock


@shared_task(name="quotas.tasks.calendar_rule_fire")
def calendar_rule_fire(rule_id: int) -> bool:
    """Fire one quota calendar rule if it is due (Celery beat's crontab entry)."""
    from quotas.models import CalendarRule
    from quotas.services.calendar import calendar_rule_fire as fire

    rule = CalendarRule.objects.filter(pk=rule_id).first()
    return bool(rule and fire(rule=rule, now=clock.now()))


@shared_task(name="quotas.tasks.calendar_rules_due")
def calendar_rules_due() -> int:
    """Fire every quota calendar rule that is due (catches up after downtime)."""
    from quotas.services.calendar import calendar_rules_fire_due

    return calendar_rules_fire_due(now=clock.now())
