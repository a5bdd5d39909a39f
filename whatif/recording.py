"""Read a past window from the database into a Recording (the replay's only ORM reader).

The quota tree at the warm-up start is today's with the audit log's later changes undone, and
those changes (scale, rebalance, settings, toggles) replay at their times. What is
approximated, and said on the result page (Recording.notes): nodes are read as they are now;
quotas created or deleted during the window are not undone; workloads submitted before the
warm-up start are replayed as if submitted at it with all their work still to do; faults
strike at their recorded times, when the workload runs then.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta

from django.db.models import Q

from jobs.bridge.snapshot import build, core_name
from jobs.choices import EventKind, Kind, Status
from jobs.models import UsageSample, Workload, WorkloadEvent
from jobs.scheduling import types as core
from quotas.choices import AuditAction
from quotas.models import QuotaAudit

from .replay.apply import apply_tree
from .replay.types import Arrival, ConfigChange, Fault, Recording, Scaling

TREE_ACTIONS = (AuditAction.SCALE, AuditAction.REBALANCE, AuditAction.TOGGLE, AuditAction.UPDATE)

WARMUP = timedelta(hours=6)
TICK = 60.0  # the control loop's usage-sample interval (jobs.tasks.SCHEDULE)
ENDED_BY_SOMEONE = (Status.CANCELLED, Status.STOPPED)
NOTES = (
    "Quota changes replay from the audit log; quotas created or deleted since are not undone.",
    "The nodes are taken as they are now, not as they were during the window.",
    "Workloads submitted before the warm-up start are replayed from it, with all their work.",
    "Recorded faults strike at their recorded times, when the workload runs then.",
)


def _arrival(w: Workload, pools: tuple[str, ...], faults: list[Fault], warm: datetime) -> Arrival:
    """One workload row as the replay's arrival."""
    submitted = max(w.submitted_at, warm).timestamp()
    ended = w.ended_at.timestamp() if w.ended_at else None
    run = None
    cancelled = None
    if w.kind == Kind.INTERACTIVE:
        if w.status == Status.STOPPED and w.started_at and ended is not None:
            run = ended - w.started_at.timestamp()
        elif w.max_duration:
            run = float(w.max_duration)
        if w.status == Status.CANCELLED:
            cancelled = ended
    elif w.status in ENDED_BY_SOMEONE:
        cancelled = ended
    return Arrival(
        name=core_name(w),
        quota=w.quota.name,
        kind=w.kind,
        replicas=w.replicas,
        request=core.Resources(w.gpu, w.cpu, w.memory),
        pools=pools,
        submitted_at=submitted,
        priority=w.priority,
        idle=w.idle_policy,
        total_work=w.total_work,
        checkpoint_interval=float(w.checkpoint_interval),
        fault_tolerance=w.fault_tolerance,
        max_restarts=w.max_restarts,
        restart_on_failure=w.restart_on_failure,
        restart_on_preemption=w.restart_on_preemption,
        restart_on_node_loss=w.restart_on_node_loss,
        run_seconds=run,
        cancelled_at=cancelled,
        faults=tuple(faults),
    )


def record_window(start: datetime, end: datetime, *, start_delay: float = 30.0) -> Recording:
    """The window's arrivals, faults, scalings, tree, nodes and recorded usage (a few queries)."""
    overlapping = Workload.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=start - WARMUP), submitted_at__lt=end
    ).select_related("workspace", "quota")
    rows = list(overlapping.order_by("submitted_at", "pk"))
    earliest = min((w.submitted_at for w in rows), default=start)
    warm = max(start - WARMUP, min(earliest, start))
    steps = math.ceil((start - warm).total_seconds() / TICK)
    warm = start - timedelta(seconds=steps * TICK)
    ids = [w.pk for w in rows]
    pools: dict[int, list[str]] = defaultdict(list)
    through = Workload.node_pools.through.objects.filter(workload_id__in=ids)
    for workload_id, name in through.values_list("workload_id", "nodepool__name"):
        pools[workload_id].append(name)
    events = WorkloadEvent.objects.filter(
        workload_id__in=ids, kind__in=[EventKind.FAULT, EventKind.SCALED], at__lte=end
    ).order_by("at", "pk")
    faults: dict[int, list[Fault]] = defaultdict(list)
    scaled: dict[int, list[tuple[datetime, dict[str, object]]]] = defaultdict(list)
    for workload_id, kind, at, data in events.values_list("workload_id", "kind", "at", "data"):
        if kind == EventKind.FAULT and at > warm:
            faults[workload_id].append(Fault(at.timestamp(), bool(data.get("node_lost"))))
        elif kind == EventKind.SCALED:
            scaled[workload_id].append((at, data))
    arrivals = []
    scalings: list[Scaling] = []
    initial: dict[str, int] = {}
    for w in rows:
        arrivals.append(_arrival(w, tuple(sorted(pools[w.pk])), faults[w.pk], warm))
        if w.kind == Kind.INFERENCE:
            name = core_name(w)
            initial[name] = _replicas_at(w, scaled[w.pk], warm)
            for at, data in scaled[w.pk]:
                if at > warm:
                    by_rule = str(data.get("reason", "")).startswith("rule")
                    scalings.append(Scaling(at.timestamp(), name, int(str(data["after"])), by_rule))
    reading = build(start)
    quotas, history = _tree_history(reading.snapshot, warm, end)
    samples = UsageSample.objects.filter(at__gt=start, at__lte=end)
    totals: dict[str, float] = defaultdict(float)
    ticks = set()
    for at, quota, in_quota, borrowed in samples.values_list(
        "at", "quota__name", "gpu_in_quota", "gpu_borrowed"
    ):
        ticks.add(at)
        totals[quota] += in_quota + borrowed
    n = len(ticks)
    return Recording(
        start=start.timestamp(),
        end=end.timestamp(),
        warm_start=warm.timestamp(),
        nodes=reading.snapshot.nodes,
        quotas=quotas,
        arrivals=tuple(arrivals),
        history=history,
        scalings=tuple(scalings),
        initial_replicas=initial,
        idle_scope=reading.snapshot.idle_scope,
        tick=TICK,
        start_delay=start_delay,
        recorded_alloc={q: v / n for q, v in totals.items()} if n else {},
        recorded_samples=n,
        notes=NOTES,
    )


def _replicas_at(
    w: Workload, scaled: list[tuple[datetime, dict[str, object]]], at: datetime
) -> int:
    """A service's target replicas at a time, from its scaling events."""
    before = [data for when, data in scaled if when <= at]
    if before:
        return int(str(before[-1]["after"]))
    if scaled:
        return int(str(scaled[0][1]["before"]))
    return w.replicas


def _own_state(
    name: str, before: object, after: object
) -> tuple[dict[str, object], dict[str, object]] | None:
    """The audited quota's own state before and after one record.

    A rebalance writes one record per quota, each holding both quotas' states: each record
    gives only its own, so the move is undone and replayed once.
    """
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    if "name" in after:
        return before, after
    old, new = before.get(name), after.get(name)
    return (old or {}, new) if isinstance(new, dict) else None


def _tree_history(
    snap: core.Snapshot, warm: datetime, end: datetime
) -> tuple[tuple[core.Quota, ...], tuple[ConfigChange, ...]]:
    """The tree at the warm-up start (today's, later audited changes undone), and those changes."""
    records = QuotaAudit.objects.filter(at__gt=warm, action__in=TREE_ACTIONS).order_by("at", "pk")
    names = {q.name for q in snap.quotas}
    rows = [
        (at, action, name, states)
        for at, action, name, before, after in records.values_list(
            "at", "action", "quota_name", "before", "after"
        )
        if name in names and (states := _own_state(name, before, after)) is not None
    ]
    quotas = snap.quotas
    for _, _, name, (old, _new) in reversed(rows):
        if old:
            quotas = apply_tree(quotas, _state(name, old), snap.nodes, check=False)
    history = tuple(
        ConfigChange(at.timestamp(), f"recorded {action} of {name}", _state(name, new))
        for at, action, name, (_old, new) in rows
        if at <= end
    )
    return quotas, history


def _state(name: str, state: dict[str, object]) -> dict[str, object]:
    return {"kind": "state", "quota": name, "state": state}
