"""Interactive time limits: stop instances at their maximum duration or after idling too long."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from jobs.choices import LIVE_POD_STATUSES, EventKind, Kind, PodStatus, Status
from jobs.events import record
from jobs.models import Workload
from jobs.wakeup import request_cycle

LIMITED_STATUSES = (Status.RUNNING, Status.QUEUED)


def _duration(seconds: int) -> str:
    """A duration the way a person writes it: 2 h, 90 min, 1 h 30 min, 45 s."""
    if seconds % 60:
        return f"{seconds} s"
    minutes = seconds // 60
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h" + (f" {rest} min" if rest else "")


def _reason(instance: Workload, now: datetime) -> str | None:
    """Why the instance must stop now, or None if it may keep running."""
    started, limit = instance.started_at, instance.max_duration
    if started is not None and limit and started + timedelta(seconds=limit) <= now:
        return f"Reached its maximum duration of {_duration(limit)}"
    if instance.idle_stop_minutes and instance.status == Status.RUNNING:
        active = instance.last_progress_at or instance.started_at
        if active is not None and active + timedelta(minutes=instance.idle_stop_minutes) <= now:
            minutes = instance.idle_stop_minutes
            return f"Idle for {minutes} minute{'' if minutes == 1 else 's'}"
    return None


def _stop(instance: Workload, reason: str, now: datetime) -> None:
    """Stop the instance and its live pods, and put it on the timeline."""
    for pod in instance.pods.filter(status__in=LIVE_POD_STATUSES):
        pod.status = PodStatus.STOPPED
        pod.ended_at = now
        pod.reason = reason
        pod.save(update_fields=["status", "ended_at", "reason"])
    instance.status = Status.STOPPED
    instance.status_reason = reason
    instance.pending_reason = ""
    instance.ended_at = now
    instance.save(update_fields=["status", "status_reason", "pending_reason", "ended_at"])
    record(instance, EventKind.FINISHED, f"Stopped: {reason}.", at=now, reason=reason)


@transaction.atomic
def interactive_time_limits_enforce(*, now: datetime) -> int:
    """Stop interactive instances past their maximum duration or idle limit; returns how many.

    Idempotent: a stopped instance is no longer Running or Queued, so a retry finds nothing.
    """
    candidates = (
        Workload.objects.select_for_update()
        .filter(kind=Kind.INTERACTIVE, status__in=LIMITED_STATUSES, started_at__isnull=False)
        .exclude(max_duration__isnull=True, idle_stop_minutes__isnull=True)
    )
    stopped = 0
    for instance in candidates:
        reason = _reason(instance, now)
        if reason is not None:
            _stop(instance, reason, now)
            stopped += 1
    if stopped:
        request_cycle()
    return stopped
