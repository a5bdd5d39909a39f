"""Interactive time limits: stop instances at their maximum duration or after idling too long."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from cluster.locking import write_lock
from console.units import duration_text
from jobs.choices import EventKind, Kind, Status
from jobs.models import Workload
from jobs.services.signals import idle_since
from jobs.services.workloads import end_workload
from jobs.wakeup import request_cycle

LIMITED_STATUSES = (Status.RUNNING, Status.QUEUED)


def _reason(instance: Workload, now: datetime) -> str | None:
    """Why the instance must stop now, or None if it may keep running."""
    started, limit = instance.started_at, instance.max_duration
    if started is not None and limit and started + timedelta(seconds=limit) <= now:
        return f"Reached its maximum duration of {duration_text(limit)}"
    if instance.idle_stop_minutes and instance.status == Status.RUNNING:
        active = idle_since(instance)  # the last activity reported, else the start
        if active is not None and active + timedelta(minutes=instance.idle_stop_minutes) <= now:
            minutes = instance.idle_stop_minutes
            return f"Idle for {minutes} minute{'' if minutes == 1 else 's'}"
    return None


def _stop(instance: Workload, reason: str, now: datetime) -> None:
    """Stop the instance and its live pods (through the backend), and put it on the timeline."""
    end_workload(
        instance,
        status=Status.STOPPED,
        reason=reason,
        now=now,
        event_kind=EventKind.FINISHED,
    )


@transaction.atomic
def interactive_time_limits_enforce(*, now: datetime) -> int:
    """Stop interactive instances past their maximum duration or idle limit; returns how many.

    Idempotent: a stopped instance is no longer Running or Queued, so a retry finds nothing.
    """
    write_lock()
    candidates = Workload.objects.filter(
        kind=Kind.INTERACTIVE, status__in=LIMITED_STATUSES, started_at__isnull=False
    ).exclude(max_duration__isnull=True, idle_stop_minutes__isnull=True)
    stopped = 0
    for instance in candidates:
        reason = _reason(instance, now)
        if reason is not None:
            _stop(instance, reason, now)
            stopped += 1
    if stopped:
        request_cycle()
    return stopped
