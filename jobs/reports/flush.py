"""Write the buffered reports: a few bulk, conditional statements per flush.

In one transaction:

1. one UPDATE of the reporting pods (last heartbeat, reported progress), only of pods still
   live (Pending or Running) of an active workload: an attempt that ended since it reported
   is left as it ended. The UPDATE holds those pods' rows until the commit, so no other writer
   can end them (nor, since a workload ends with its pods, their workloads) meanwhile;
2. one SELECT of those pods that are still live, which the rest writes for, and one of
   their workloads' last checkpoint times (which checkpoints move on);
3. one UPDATE of their workloads: checkpoint label and time, last activity, and the job's
   progress from replica 0's report (the rank that, by convention, logs) as a fraction of
   total_work;
4. one INSERT of a checkpoint event per workload whose checkpoint moved on.

Every value is written only over an older one (its time is later than the row's), so two web
processes flushing their own buffers never move a time backwards. Statements cover at most
``BATCH`` rows each.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.fields import CharField, DateTimeField, Field, FloatField
from django.db.models.functions import Cast

from jobs import events
from jobs.choices import ACTIVE_STATUSES, LIVE_POD_STATUSES, EventKind
from jobs.models import Pod, Workload
from jobs.reports.buffer import Pending

BATCH = 500


@dataclass(frozen=True)
class Flushed:
    """What one flush wrote: rows of pods and workloads, checkpoint events."""

    pods: int
    workloads: int
    checkpoints: int


@dataclass
class _Job:
    """What a flush writes on one workload, gathered from its replicas' reports."""

    checkpoint: str | None = None
    checkpoint_at: datetime | None = None
    checkpoint_replica: int = 0
    activity_at: datetime | None = None
    progress: float | None = None
    progress_at: datetime | None = None


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    """The ids in runs of at most BATCH."""
    for start in range(0, len(ids), BATCH):
        yield ids[start : start + BATCH]


def _older(time_field: str, at: datetime) -> Q:
    """The row's time is unset or not later than `at` (the report is the newer)."""
    return Q(**{f"{time_field}__isnull": True}) | Q(**{f"{time_field}__lte": at})


def _case(field: str, whens: list[When], output: Any) -> Case:
    """The field's new value per row, or its own where no condition holds."""
    return Case(*whens, default=F(field), output_field=output)


def _pods_update(pending: dict[int, Pending]) -> int:
    """Step 1: heartbeats and progress of the pods still live; the rows written."""
    ids = sorted(pod for pod, entry in pending.items() if entry.heartbeat_at is not None)
    written = 0
    for chunk in _chunks(ids):
        beats, progress = [], []
        for pod in chunk:
            entry = pending[pod]
            assert entry.heartbeat_at is not None
            newer = Q(pk=pod) & _older("last_heartbeat_at", entry.heartbeat_at)
            beats.append(When(newer, then=Value(entry.heartbeat_at)))
            if entry.progress is not None:
                progress.append(When(newer, then=Value(entry.progress)))
        fields: dict[str, Any] = {
            "last_heartbeat_at": _case("last_heartbeat_at", beats, DateTimeField())
        }
        if progress:
            fields["reported_progress"] = _case("reported_progress", progress, FloatField())
        written += (
            Pod.objects.filter(
                pk__in=chunk, status__in=LIVE_POD_STATUSES, workload__status__in=ACTIVE_STATUSES
            )
            .order_by()
            .update(**fields)
        )
    return written


def _jobs(pending: dict[int, Pending]) -> dict[int, _Job]:
    """Step 2: per workload, what its still-live reporting pods said."""
    jobs: dict[int, _Job] = {}
    ids = sorted(
        pod
        for pod, entry in pending.items()
        if entry.checkpoint_at or entry.activity_at or entry.progress_at
    )
    for chunk in _chunks(ids):
        live = Pod.objects.filter(
            pk__in=chunk, status__in=LIVE_POD_STATUSES, workload__status__in=ACTIVE_STATUSES
        ).values_list("pk", "workload_id", "index")
        for pod, workload, index in live:
            entry = pending[pod]
            if entry.workload != workload:
                continue  # accept() checked it; a row never changes workload
            job = jobs.setdefault(workload, _Job())
            at = entry.checkpoint_at
            if at is not None and (job.checkpoint_at is None or at > job.checkpoint_at):
                job.checkpoint, job.checkpoint_at = entry.checkpoint, at
                job.checkpoint_replica = index
            at = entry.activity_at
            if at is not None and (job.activity_at is None or at > job.activity_at):
                job.activity_at = at
            if index == 0 and entry.progress_at is not None:
                job.progress, job.progress_at = entry.progress, entry.progress_at
    return jobs


def _workloads_update(jobs: dict[int, _Job]) -> int:
    """Step 3: checkpoints, activity and progress of the workloads; the rows written."""
    written = 0
    for chunk in _chunks(sorted(jobs)):
        label, label_at, activity, progress, progress_at = [], [], [], [], []
        for workload in chunk:
            job = jobs[workload]
            if job.checkpoint_at is not None:
                newer = Q(pk=workload) & _older("last_checkpoint_at", job.checkpoint_at)
                label.append(When(newer, then=Value(job.checkpoint)))
                label_at.append(When(newer, then=Value(job.checkpoint_at)))
            if job.activity_at is not None:
                newer = Q(pk=workload) & _older("last_activity_at", job.activity_at)
                activity.append(When(newer, then=Value(job.activity_at)))
            if job.progress_at is not None:
                newer = Q(pk=workload, total_work__gt=0) & _older(
                    "last_progress_at", job.progress_at
                )
                done = Cast(Value(job.progress), FloatField()) * F("total_work")
                progress.append(When(newer, then=done))
                progress_at.append(When(newer, then=Value(job.progress_at)))
        fields: dict[str, Any] = {}
        output: Field[Any, Any]
        for field, whens, output in (
            ("checkpoint_label", label, CharField()),
            ("last_checkpoint_at", label_at, DateTimeField()),
            ("last_activity_at", activity, DateTimeField()),
            ("progress", progress, FloatField()),
            ("last_progress_at", progress_at, DateTimeField()),
        ):
            if whens:
                fields[field] = _case(field, whens, output)
        if fields:
            written += (
                Workload.objects.filter(pk__in=chunk, status__in=ACTIVE_STATUSES)
                .order_by()
                .update(**fields)
            )
    return written


def _checkpoints_moved(jobs: dict[int, _Job]) -> list[tuple[Workload, _Job]]:
    """The workloads whose checkpoint this flush is about to write (read before step 3)."""
    times = {w: job.checkpoint_at for w, job in jobs.items() if job.checkpoint_at is not None}
    if not times:
        return []
    rows = Workload.objects.filter(pk__in=times, status__in=ACTIVE_STATUSES).only(
        "pk", "name", "status", "in_quota", "workspace_id", "quota_id", "last_checkpoint_at"
    )
    return [
        (row, jobs[row.pk])
        for row in rows
        if row.last_checkpoint_at is None or row.last_checkpoint_at <= times[row.pk]
    ]


@transaction.atomic
def reports_flush(*, pending: dict[int, Pending]) -> Flushed:
    """Write the pending reports of replicas that are still live; what was written."""
    pods = _pods_update(pending)
    jobs = _jobs(pending)
    moved = _checkpoints_moved(jobs)
    workloads = _workloads_update(jobs)
    timeline = events.Timeline()
    for workload, job in moved:
        assert job.checkpoint_at is not None
        timeline.add(
            workload,
            EventKind.CHECKPOINT,
            f"Checkpoint {job.checkpoint} reported by replica {job.checkpoint_replica}.",
            at=job.checkpoint_at,
            label=job.checkpoint,
            replica=job.checkpoint_replica,
        )
    timeline.save()
    return Flushed(pods=pods, workloads=workloads, checkpoints=len(moved))
