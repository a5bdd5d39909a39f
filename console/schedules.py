"""What every cron rule of the console shares: its watermark and its django-celery-beat mirror.

A rule (a service's scaling rule, a quota calendar rule) has `cron`, `timezone`, `enabled`,
`created_at`, the watermark `last_fired_at` and a `periodic_task`. The rule alone decides
whether a firing runs: beat's crontab task and the embedded runner's sweep both end in the
rule's fire service, which asks `due_firing` under the write lock and moves the watermark, so
duplicate, late or retried ticks apply a firing once.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol

from django_celery_beat.models import CrontabSchedule, PeriodicTask

from console.cron import CronExpr, parse, zone

# A beat tick not picked up within a minute is dropped: the next tick (or the embedded runner)
# catches the rule up anyway, so missed ticks never pile up in the queue.
EXPIRE_SECONDS = 60


class CronRule(Protocol):
    """The fields a cron rule keeps (a Django model's instance)."""

    pk: Any
    cron: str
    timezone: str
    enabled: bool
    created_at: datetime
    last_fired_at: datetime | None
    periodic_task: PeriodicTask | None
    periodic_task_id: int | None

    def save(self, *, update_fields: list[str] | None = None) -> None: ...


def due_firing(rule: CronRule, now: datetime) -> datetime | None:
    """The rule's firing at or before now that has not been handled yet, if any (no queries)."""
    if not rule.enabled:
        return None
    latest = parse(rule.cron).previous_at_or_before(now, rule.timezone)
    if latest is None or latest <= rule.created_at:
        return None
    if rule.last_fired_at is not None and latest <= rule.last_fired_at:
        return None
    return latest


def skip_past_firings(rule: CronRule, cron: CronExpr, now: datetime) -> None:
    """A new schedule (or re-enabling) does not fire retroactively: the latest firing under
    it up to now counts as handled, as it would for a rule created now."""
    if not rule.enabled:
        return
    latest = cron.previous_at_or_before(now, rule.timezone)
    floor = rule.created_at
    if rule.last_fired_at is not None and rule.last_fired_at > floor:
        floor = rule.last_fired_at
    if latest is not None and latest > floor:
        rule.last_fired_at = latest


def periodic_task_sync(
    rule: CronRule, cron: CronExpr, *, name: str, task_path: str, description: str
) -> None:
    """Create or update the rule's beat task so it matches the rule."""
    schedule, _ = CrontabSchedule.objects.get_or_create(
        **cron.celery_fields(), timezone=zone(rule.timezone)
    )
    task = rule.periodic_task or PeriodicTask()
    previous_schedule_id = task.crontab_id if task.pk else None
    task.name = name[:200]
    task.task = task_path
    task.crontab = schedule
    task.interval = None
    task.kwargs = json.dumps({"rule_id": rule.pk})
    task.enabled = rule.enabled
    task.expires = None
    task.expire_seconds = EXPIRE_SECONDS
    task.description = description
    task.save()
    if rule.periodic_task_id != task.pk:
        rule.periodic_task = task
        rule.save(update_fields=["periodic_task"])
    if previous_schedule_id and previous_schedule_id != schedule.pk:
        _drop_unused_schedule(previous_schedule_id)


def _drop_unused_schedule(schedule_id: int) -> None:
    """Delete a crontab schedule no periodic task uses any more."""
    CrontabSchedule.objects.filter(pk=schedule_id, periodictask__isnull=True).delete()


def periodic_task_drop(task: PeriodicTask | None) -> None:
    """Delete a rule's beat task, and its crontab if no other task uses it."""
    if task is not None:
        schedule_id = task.crontab_id
        task.delete()
        if schedule_id:
            _drop_unused_schedule(schedule_id)
