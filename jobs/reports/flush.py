"""Write the buffered reports: a few bulk, conditional statements per flush.

In one transaction:

1. one UPDATE of the reporting pods (last heartbeat, reported progress), only of pods still
   live (Pending or Running) of an active workload: an attempt that ended since it reported
   is left as it ended. The UPDATE holds those pods' rows until the commit, so no other writer
   can end them (nor, since a workload ends with its pods, their workloads) meanwhile;
2. one SELECT (FOR UPDATE) of the reporting pods that are still live, which the rest writes
   for, and one of their workloads' last checkpoint times (which checkpoints move on);
3. one UPDATE of their workloads: checkpoint label and time, last activity, and the job's
   progress from replica 0's report (the rank that, by convention, logs) as a fraction of
   total_work;
4. one INSERT of a checkpoint event per workload whose checkpoint moved on.

Every value is written only over an older one (its time is not before the row's), so two
web processes flushing their own buffers never move a time backwards. Statements cover at most
``BATCH`` rows each.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, F, Q, When
from django.db.models.expressions import RawSQL
from django.db.models.fields import CharField, DateTimeField, Field, FloatField
from django.db.models.functions import Coalesce

from console import metrics
from jobs import events
from jobs.choices import ACTIVE_STATUSES, LIVE_POD_STATUSES, EventKind
from jobs.models import Pod, Workload
from jobs.reports.buffer import Pending

# Each row's CASE is searched in order: short statements keep that search short.
BATCH = 250


@dataclass(frozen=True)
class Flushed:
    """What one flush wrote: rows of pods and workloads, checkpoint events, and statements."""

    pods: int
    workloads: int
    checkpoints: int
    statements: dict[str, int]


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


def _by_id(values: dict[int, Any], output: Field[Any, Any]) -> RawSQL:
    """Each listed row's value (CASE id WHEN … END; NULL for other rows) as one expression.

    Django compiles a When per row in about a millisecond: 2,000 rows took seconds of CPU a
    flush. This is one string, its datetimes adapted as the ORM stores them.
    """
    ops = connection.ops
    params: list[Any] = []
    for pk, value in values.items():
        if isinstance(value, datetime):
            value = ops.adapt_datetimefield_value(value)
        params += [pk, value]
    whens = " ".join(["WHEN %s THEN %s"] * len(values))
    return RawSQL(f"CASE {ops.quote_name('id')} {whens} END", params, output_field=output)


def _unset_or_before(field: str, at: Any) -> Q:
    """The row's `field` is unset or not later than `at` (the report is the newer)."""
    return Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lte": at})


def _when(newer: Q, value: Any, field: str) -> Case:
    """`value` where `newer` holds and it is not NULL, else the row's own `field`."""
    return Case(When(newer, then=Coalesce(value, F(field))), default=F(field))


def _pods_update(pending: dict[int, Pending]) -> tuple[int, int]:
    """Step 1: heartbeats and progress of the pods still live; rows and statements."""
    ids = sorted(pod for pod, entry in pending.items() if entry.heartbeat_at is not None)
    written = statements = 0
    for chunk in _chunks(ids):
        at = _by_id({pod: pending[pod].heartbeat_at for pod in chunk}, DateTimeField())
        progress = {
            pod: pending[pod].progress for pod in chunk if pending[pod].progress is not None
        }
        newer = _unset_or_before("last_heartbeat_at", at)
        fields: dict[str, Any] = {"last_heartbeat_at": _when(newer, at, "last_heartbeat_at")}
        if progress:
            fields["reported_progress"] = _when(
                newer, _by_id(progress, FloatField()), "reported_progress"
            )
        written += (
            Pod.objects.filter(
                pk__in=chunk, status__in=LIVE_POD_STATUSES, workload__status__in=ACTIVE_STATUSES
            )
            .order_by()
            .update(**fields)
        )
        statements += 1
    return written, statements


def _jobs(pending: dict[int, Pending]) -> dict[int, _Job]:
    """Step 2: per workload, what its still-live reporting pods said."""
    jobs: dict[int, _Job] = {}
    ids = sorted(
        pod
        for pod, entry in pending.items()
        if entry.checkpoint_at or entry.activity_at or entry.progress_at
    )
    for chunk in _chunks(ids):
        # Locked (PostgreSQL) like the pods step 1 wrote: those that only sent a checkpoint
        # or activity cannot end either before the commit.
        live = (
            Pod.objects.select_for_update(of=("self",))
            .filter(
                pk__in=chunk, status__in=LIVE_POD_STATUSES, workload__status__in=ACTIVE_STATUSES
            )
            .values_list("pk", "workload_id", "index")
        )
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


def _workloads_update(jobs: dict[int, _Job]) -> tuple[int, int]:
    """Step 3: checkpoints, activity and progress of the workloads; rows and statements."""
    written = statements = 0
    for chunk in _chunks(sorted(jobs)):
        rows = [(workload, jobs[workload]) for workload in chunk]
        fields: dict[str, Any] = {}
        checkpoints = {w: job for w, job in rows if job.checkpoint_at is not None}
        if checkpoints:
            at = _by_id({w: j.checkpoint_at for w, j in checkpoints.items()}, DateTimeField())
            label = _by_id({w: j.checkpoint for w, j in checkpoints.items()}, CharField())
            newer = _unset_or_before("last_checkpoint_at", at)
            fields["checkpoint_label"] = _when(newer, label, "checkpoint_label")
            fields["last_checkpoint_at"] = _when(newer, at, "last_checkpoint_at")
            # A requeue resumes the shown progress from here: the progress stored before this
            # flush, never ahead of the checkpoint (a report in this flush may be later).
            fields["checkpoint_progress"] = _when(newer, F("progress"), "checkpoint_progress")
        activity = {w: job.activity_at for w, job in rows if job.activity_at is not None}
        if activity:
            at = _by_id(activity, DateTimeField())
            newer = _unset_or_before("last_activity_at", at)
            fields["last_activity_at"] = _when(newer, at, "last_activity_at")
        progress = {w: job for w, job in rows if job.progress_at is not None}
        if progress:
            at = _by_id({w: j.progress_at for w, j in progress.items()}, DateTimeField())
            fraction = _by_id({w: j.progress for w, j in progress.items()}, FloatField())
            newer = Q(total_work__gt=0) & _unset_or_before("last_progress_at", at)
            fields["progress"] = _when(newer, fraction * F("total_work"), "progress")
            fields["last_progress_at"] = _when(newer, at, "last_progress_at")
        if fields:
            written += (
                Workload.objects.filter(pk__in=chunk, status__in=ACTIVE_STATUSES)
                .order_by()
                .update(**fields)
            )
            statements += 1
    return written, statements


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
    pods, pod_statements = _pods_update(pending)
    jobs = _jobs(pending)
    moved = _checkpoints_moved(jobs)
    workloads, workload_statements = _workloads_update(jobs)
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
    statements = {"pod": pod_statements, "workload": workload_statements, "event": int(bool(moved))}
    flushed = Flushed(pods=pods, workloads=workloads, checkpoints=len(moved), statements=statements)
    metrics.after_commit(lambda: _count(flushed))
    return flushed


def _count(flushed: Flushed) -> None:
    """Add a committed flush to the process's metrics."""
    rows = {"pod": flushed.pods, "workload": flushed.workloads, "event": flushed.checkpoints}
    for table, n in flushed.statements.items():
        metrics.REPORT_STATEMENTS.labels(table=table).inc(n)
        metrics.REPORT_ROWS.labels(table=table).inc(rows[table])
