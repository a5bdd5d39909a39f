"""One scheduling cycle: snapshot the database, run the pure core, apply its decisions."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max

from cluster.locking import state_version, write_lock
from jobs import bridge
from jobs.backends import get_backend
from jobs.backends.base import Backend
from jobs.choices import ENDED_STATUSES, LIVE_POD_STATUSES, EventKind, Kind, PodStatus, Status
from jobs.events import Timeline, batch, record
from jobs.models import ControlState, Pod, Workload
from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import Admission, CycleResult, Preemption, ScenarioError
from jobs.services.pods import pods_end
from jobs.visibility import placement_data
from jobs.wakeup import request_sync

# {quota} is the quota the core names with the reason (Preemption.quota)
REASON_TEXT = {
    "reclaim": "reclaimed: it ran on capacity borrowed from {quota}",
    "child_preemption": "child-level preemption by the parent {quota}",
    "priority": "a higher-priority job in {quota}",
    "fair_share": "fair-share reclaim among borrowers",
    "min": "{quota}'s smaller min left it Not in Quota",
}


@dataclass(frozen=True)
class CycleSummary:
    """What one cycle did, for logs and benchmarks."""

    ran: bool
    admitted: int = 0
    preempted: int = 0
    pending: int = 0


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


def _plan(now: datetime) -> tuple[bridge.Bridge, CycleResult]:
    """Snapshot the database and ask the core what to do."""
    snap = bridge.build(now)
    return snap, run_cycle(snap.snapshot)


def _preempt(p: Preemption, rows: dict[str, Workload], now: datetime, backend: Backend) -> None:
    """Evict a victim: pods Resource Preempted, roll back to the checkpoint, requeue or fail."""
    victim = rows[p.workload]
    preemptor = rows.get(p.by)
    by = preemptor.name if preemptor else p.by
    about = p.quota or victim.quota.name
    about = about if about.lower().startswith("quota") else f"Quota {about}"
    why = REASON_TEXT.get(p.reason, p.reason).format(quota=about)
    pods_end(
        victim.live_pods,  # type: ignore[attr-defined]
        status=PodStatus.PREEMPTED,
        reason=f"Resource Preempted by {by}: {why}",
        now=now,
        backend=backend,
    )
    lost = max(victim.progress - victim.checkpoint_progress, 0.0)
    victim.progress = victim.checkpoint_progress
    victim.last_progress_at = None
    victim.in_quota = None
    requeue = victim.fault_tolerance and victim.restart_on_preemption
    if requeue:
        victim.status, victim.restarts = Status.REQUEUED, victim.restarts + 1
        victim.status_reason = f"Preempted by {by} ({why}); requeued from its last checkpoint."
    else:
        victim.status, victim.ended_at = Status.FAILED, now
        victim.status_reason = f"Preempted by {by} ({why}); fault tolerance is off."
    victim.save(
        update_fields=[
            "progress",
            "last_progress_at",
            "in_quota",
            "status",
            "status_reason",
            "restarts",
            "ended_at",
        ]
    )
    record(
        victim,
        EventKind.PREEMPTED,
        f"Preempted by {by}: {why}. Work lost since the last checkpoint: "
        f"{lost / 3600:.2f} GPU-hours. {'Requeued.' if requeue else 'Failed (Preempted).'}",
        at=now,
        by=by,
        reason=p.reason,
        work_lost_gpu_seconds=lost,
    )
    if preemptor is not None:
        record(
            preemptor,
            EventKind.PREEMPTOR,
            f"Preempted {victim.name} ({why}) to make room.",
            at=now,
            victim=victim.name,
            reason=p.reason,
        )


def _admit_all(
    admissions: list[Admission], rows: dict[str, Workload], now: datetime, backend: Backend
) -> None:
    """Start the admitted workloads: nodes, pod indexes, pods and events in a query each.

    Their rows are stored by what changed (mostly alike: running since now, In Quota or
    not), an UPDATE for each kind of change rather than one per workload.
    """
    # Evicted earlier this cycle with fault tolerance off: those ended Failed.
    admissions = [a for a in admissions if rows[a.workload].status not in ENDED_STATUSES]
    nodes = bridge.node_ids([pl.node for a in admissions for pl in a.placements])
    started = {rows[a.workload].pk for a in admissions}
    top = Pod.objects.filter(workload__in=started).values("workload").annotate(top=Max("index"))
    next_index = {r["workload"]: r["top"] + 1 for r in top}
    pods: list[Pod] = []
    changes: dict[tuple[tuple[str, Any], ...], list[int]] = defaultdict(list)
    timeline = Timeline()
    for a in admissions:  # one per workload
        w = rows[a.workload]
        new, fields = _admit(a, w, nodes, next_index, now, backend, timeline)
        pods += new
        changes[tuple((f, getattr(w, f)) for f in fields)].append(w.pk)
    Pod.objects.bulk_create(pods)
    if pods:  # the backend creates or starts the pods then: sync it then
        request_sync(min(p.start_after or now for p in pods))
    for change, ids in changes.items():
        _update(ids, **dict(change))
    timeline.save()


def _admit(
    a: Admission,
    w: Workload,
    nodes: dict[str, int],
    next_index: dict[int, int],
    now: datetime,
    backend: Backend,
    timeline: Timeline,
) -> tuple[list[Pod], list[str]]:
    """Start a workload (or more replicas of a service) on the chosen nodes.

    Returns its new pods and the fields of its row it changed, for the caller to store.
    """
    first_index = next_index.get(w.pk, 0)
    next_index[w.pk] = first_index + len(a.placements)
    pods = []
    for i, placement in enumerate(a.placements):
        pod = Pod(
            workload=w,
            index=first_index + i,
            attempt=w.restarts,
            node_id=nodes[placement.node],
            devices=list(placement.devices),
            status=PodStatus.PENDING,
            borrowed=not a.in_quota,
            created_at=now,
        )
        backend.create_pod(pod, now=now)
        pods.append(pod)
    resumed = w.status == Status.REQUEUED
    fields = ["in_quota", "pending_reason"]
    if w.status != Status.RUNNING:
        w.status, w.status_reason = Status.RUNNING, ""
        w.started_at = now  # this attempt's start: the classification ranks by it
        w.last_progress_at = now
        w.last_checkpoint_at = now
        fields += [
            "status",
            "status_reason",
            "started_at",
            "last_progress_at",
            "last_checkpoint_at",
        ]
    w.in_quota, w.pending_reason = a.in_quota, ""
    label = "In Quota" if a.in_quota else "Not in Quota (borrowed idle capacity)"
    timeline.add(w, EventKind.ADMITTED, f"Admitted {label}.", at=now, in_quota=a.in_quota)
    nodes_used = [pl.node for pl in a.placements]
    # Members read the message: a borrowed placement names no node (jobs.visibility).
    where = ", ".join(sorted(set(nodes_used))) if a.in_quota else "idle capacity"
    timeline.add(
        w,
        EventKind.PLACED,
        f"{len(pods)} replica(s) placed on {where}.",
        at=now,
        **placement_data(nodes_used, borrowed=not a.in_quota),
    )
    if resumed and w.kind == Kind.TRAINING and w.total_work:
        pct = 100 * w.progress / w.total_work
        timeline.add(
            w,
            EventKind.RESUMED,
            f"Resumed from its last checkpoint at {pct:.0f}% progress.",
            at=now,
            progress=w.progress,
        )
    return pods, fields


def _classify(result: CycleResult, rows: dict[str, Workload], now: datetime) -> None:
    """Store the In Quota / Not in Quota label of running workloads where it changed."""
    for name, in_quota in result.classification.items():
        w = rows.get(name)
        if w is None or w.in_quota == in_quota or w.status != Status.RUNNING:
            continue
        w.in_quota = in_quota
        w.save(update_fields=["in_quota"])
        Pod.objects.filter(workload=w, status__in=LIVE_POD_STATUSES).update(borrowed=not in_quota)
        label = "In Quota" if in_quota else "Not in Quota (preemptible)"
        record(w, EventKind.ADMITTED, f"Now {label}.", at=now, in_quota=in_quota, label=True)


def _pending(result: CycleResult, rows: dict[str, Workload]) -> None:
    """Store each waiting workload's reason sentence where it changed.

    One UPDATE per sentence: the waiting jobs of a quota mostly share theirs, and a
    bulk_update of many rows (a CASE per row) was a good part of a cycle's time.
    """
    changed: dict[str, list[int]] = defaultdict(list)
    for p in result.pending:
        w = rows.get(p.workload)
        reason = p.reason[:300]
        if w is not None and w.pending_reason != reason:
            w.pending_reason = reason
            changed[reason].append(w.pk)
    for reason, ids in changed.items():
        _update(ids, pending_reason=reason)


def _update(ids: list[int], **values: Any) -> None:
    """Set the same values on many workload rows (500 ids a statement)."""
    for at in range(0, len(ids), 500):
        Workload.objects.filter(pk__in=ids[at : at + 500]).update(**values)


def scheduling_cycle_run(*, now: datetime, backend: Backend | None = None) -> CycleSummary:
    """Run one cycle, unless another process is running one.

    The snapshot is read and the core run before the write transaction (under SQLite's
    single writer, submits need not wait behind them). Inside it, under the write lock
    (`jobs.locking`), the decisions apply only if no writer committed since the snapshot was
    read; otherwise the cycle plans again there, where nothing but new submits can change what
    it reads. So no decision is ever applied to a state it was not made for.
    """
    backend = backend or get_backend()
    version = state_version()
    planned: tuple[bridge.Bridge, CycleResult] | None
    try:
        planned = _plan(now)
    except ScenarioError:  # a service above its target, until _scale_down stops replicas
        planned = None
    with transaction.atomic():
        state = _cycle_lock()
        if state is None:
            return CycleSummary(ran=False)
        current = write_lock() == version + 1
        with batch():
            if _scale_down(now, backend) or planned is None or not current:
                planned = _plan(now)
            snap, result = planned
            _apply(result, snap, now, backend)
        state.cycles += 1
        state.last_cycle_at = now
        state.save(update_fields=["cycles", "last_cycle_at"])
    return CycleSummary(True, len(result.admitted), len(result.preempted), len(result.pending))


def _apply(result: CycleResult, snap: bridge.Bridge, now: datetime, backend: Backend) -> None:
    """Store the core's decisions and tell the cluster backend."""
    for p in result.preempted:
        _preempt(p, snap.workloads, now, backend)
    _admit_all(list(result.admitted), snap.workloads, now, backend)
    _classify(result, snap.workloads, now)
    _pending(result, snap.workloads)
