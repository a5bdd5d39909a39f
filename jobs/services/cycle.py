"""One scheduling cycle: snapshot the database, run the pure core, apply its decisions.

The bridge (`jobs.bridge`) reads the rows, runs the core and plans the row changes; this
service takes the locks and applies the plan.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from cluster.locking import state_version, write_lock
from console import metrics
from jobs.backends import get_backend
from jobs.backends.base import Backend
from jobs.bridge.plan import Eviction, Plan, Relabel, Start, Unplannable, cycle_plan
from jobs.choices import LIVE_POD_STATUSES, Kind, PodStatus, Status
from jobs.events import Timeline, batch, record
from jobs.models import ControlState, Pod, Workload
from jobs.services.pods import pods_end
from jobs.wakeup import request_sync
from quotas.models import Quota

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CycleSummary:
    """What one cycle did, for logs and benchmarks."""

    ran: bool
    admitted: int = 0
    preempted: int = 0
    pending: int = 0
    unsettled: bool = False


def _cycle_lock() -> ControlState | None:
    """Take the cycle lock, so cycles never overlap: None when another cycle holds it.

    A row lock skipped when held on PostgreSQL; SQLite's transactions never overlap anyway.
    """
    ControlState.objects.get_or_create(pk=1)
    return ControlState.objects.select_for_update(skip_locked=True).filter(pk=1).first()


def _scale_down(now: datetime, backend: Backend) -> bool:
    """Stop the newest replicas of services whose target fell below what runs; any?"""
    stopped = False
    services = Workload.objects.filter(kind=Kind.INFERENCE, status=Status.RUNNING)
    for service in services.prefetch_related("pods"):
        live = [p for p in service.pods.all() if p.status in LIVE_POD_STATUSES]
        extra = len(live) - service.replicas
        if extra <= 0:
            continue
        newest = sorted(live, key=lambda p: (p.created_at, p.pk), reverse=True)[:extra]
        pods_end(newest, status=PodStatus.STOPPED, reason="Scaled down", now=now, backend=backend)
        if not service.replicas:  # at zero it holds nothing, In Quota or not
            Workload.objects.filter(pk=service.pk).update(in_quota=None)
        stopped = True
    return stopped


def _phase(name: str, seconds: float) -> None:
    """Observe one phase of the cycle."""
    metrics.CYCLE_DURATION.labels(phase=name).observe(seconds)


def _plan(now: datetime) -> Plan:
    """Snapshot the database, ask the core what to do, and have the bridge plan the rows."""
    return cycle_plan(now, phase=_phase)


def _count_evictions(evictions: tuple[Eviction, ...]) -> None:
    """Count the preemptions (kind, GPU-seconds lost) and the restarts they cause, at commit.

    Only the victims' quota names are read (one query, when any victim).
    """
    if not evictions:
        return
    names = dict(
        Quota.objects.filter(pk__in={e.workload.quota_id for e in evictions}).values_list(
            "pk", "name"
        )
    )
    counts: list[tuple[str, str, float, bool]] = []
    for e in evictions:
        data = e.notes[0].data if e.notes else {}
        reason = str(data.get("reason", "other"))
        requeued = e.values.get("status") == Status.REQUEUED
        lost = float(data.get("work_lost_gpu_seconds", 0.0))
        counts.append(
            (
                names.get(e.workload.quota_id, ""),
                metrics.PREEMPTION_KIND.get(reason, reason),
                lost,
                requeued,
            )
        )

    def count() -> None:
        for quota, kind, lost, requeued in counts:
            metrics.PREEMPTIONS.labels(quota=quota, kind=kind).inc()
            metrics.PREEMPTION_LOST.labels(quota=quota).inc(lost)
            if requeued:
                metrics.RESTARTS.labels(quota=quota, cause="preemption").inc()

    metrics.after_commit(count)


def _evict(e: Eviction, now: datetime, backend: Backend) -> None:
    """Evict a victim: end its pods, store its row, record its and its preemptor's events."""
    ends = e.pods_end
    pods_end(ends.pods, status=ends.status, reason=ends.reason, now=now, backend=backend)
    for field, value in e.values.items():
        setattr(e.workload, field, value)
    e.workload.save(update_fields=list(e.values))
    for note in e.notes:
        record(note.workload, note.kind, note.message, at=now, **note.data)


def _start_all(starts: tuple[Start, ...], now: datetime, backend: Backend) -> None:
    """Start the admitted workloads: pods and events in a query each.

    Their rows are stored by what changed (mostly alike: running since now, In Quota or
    not), an UPDATE for each kind of change rather than one per workload.
    """
    pods: list[Pod] = []
    changes: dict[tuple[tuple[str, Any], ...], list[int]] = defaultdict(list)
    timeline = Timeline()
    for s in starts:  # one per workload
        for pod in s.pods:
            backend.create_pod(pod, now=now)
        for field, value in s.values.items():
            setattr(s.workload, field, value)
        for note in s.notes:
            timeline.add(note.workload, note.kind, note.message, at=now, **note.data)
        pods += s.pods
        changes[tuple(s.values.items())].append(s.workload.pk)
    Pod.objects.bulk_create(pods)
    if pods:  # the backend creates or starts the pods then: sync it then
        request_sync(min(p.start_after or now for p in pods))
    for change, ids in changes.items():
        _update(ids, **dict(change))
    timeline.save()


def _relabel(r: Relabel, now: datetime) -> None:
    """Store a running workload's new In Quota / Not in Quota label; its live pods follow."""
    w = r.workload
    w.in_quota = r.in_quota
    w.save(update_fields=["in_quota"])
    Pod.objects.filter(workload=w, status__in=LIVE_POD_STATUSES).update(borrowed=not r.in_quota)
    record(w, r.note.kind, r.note.message, at=now, **r.note.data)


def _update(ids: list[int], **values: Any) -> None:
    """Set the same values on many workload rows (500 ids a statement)."""
    for at in range(0, len(ids), 500):
        Workload.objects.filter(pk__in=ids[at : at + 500]).update(**values)


def scheduling_cycle_run(*, now: datetime, backend: Backend | None = None) -> CycleSummary:
    """Run one cycle, unless another process is running one.

    The snapshot is read and the core run before the write transaction (under SQLite's
    single writer, submits need not wait behind them). Inside it, under the write lock
    (`cluster/locking.py`), the decisions apply only if no writer committed since the snapshot was
    read; otherwise the cycle plans again there, where nothing but new submits can change what
    it reads. So no decision is ever applied to a state it was not made for.
    """
    started = time.perf_counter()
    backend = backend or get_backend()
    version = state_version()
    planned: Plan | None
    try:
        planned = _plan(now)
    except Unplannable:  # a service above its target, until _scale_down stops replicas
        planned = None
    with transaction.atomic():
        state = _cycle_lock()
        if state is None:
            return CycleSummary(ran=False)
        current = write_lock() == version + 1
        with batch():
            if _scale_down(now, backend) or planned is None or not current:
                planned = _plan(now)
            with metrics.timed(metrics.CYCLE_DURATION, phase="apply"):
                _apply(planned, now, backend)
                _count_evictions(planned.evictions)
        state.cycles += 1
        state.last_cycle_at = now
        state.save(update_fields=["cycles", "last_cycle_at"])
    summary = CycleSummary(
        True, planned.admitted, planned.preempted, planned.pending, planned.unsettled
    )
    _done(summary, time.perf_counter() - started)
    return summary


def _done(summary: CycleSummary, seconds: float) -> None:
    """After the commit: observe the cycle, stamp its success, log its summary."""
    metrics.CYCLES.inc()
    metrics.CYCLE_DURATION.labels(phase="total").observe(seconds)
    metrics.stamp(metrics.LAST_CYCLE_KEY)
    log.info(
        "cycle: %d admitted, %d preempted, %d pending in %.3f s",
        summary.admitted,
        summary.preempted,
        summary.pending,
        seconds,
        extra={
            "admitted": summary.admitted,
            "preempted": summary.preempted,
            "pending": summary.pending,
            "duration": round(seconds, 6),
        },
    )
    if summary.unsettled:
        metrics.CYCLES_UNSETTLED.inc()
        log.warning(
            "cycle: the core ran out of admission rounds with retries left; the next cycle "
            "may undo some of this one's decisions (a victim may take its place back)",
            extra={"unsettled": True},
        )


def _apply(plan: Plan, now: datetime, backend: Backend) -> None:
    """Store the planned changes and tell the cluster backend, in the order they were planned."""
    for eviction in plan.evictions:
        _evict(eviction, now, backend)
    _start_all(plan.starts, now, backend)
    for relabel in plan.relabels:
        _relabel(relabel, now)
    for reason, ids in plan.reasons.items():
        _update(ids, pending_reason=reason)
