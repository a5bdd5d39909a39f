"""The core to rows: a cycle's decisions as a typed plan of row changes for the services.

The plan is computed in full before anything is applied, so each decision is planned on the
rows as the decisions before it leave them (`_Ahead`), as if they had been applied already.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Max

from cluster.models import Node
from jobs.bridge.snapshot import Reading, WorkloadInfo, build
from jobs.choices import ENDED_STATUSES, EventKind, Kind, PodStatus, Status
from jobs.models import Pod, Workload
from jobs.progress import NO_CHECKPOINT, lost_text, percent, times
from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.tree import short_name
from jobs.scheduling.types import Admission, CycleResult, Pending, Preemption, ScenarioError
from jobs.visibility import placement_data

# {quota} is the quota the core names with the reason (Preemption.quota)
REASON_TEXT = {
    "reclaim": "reclaimed: it ran on capacity borrowed from {quota}",
    "child_preemption": "child-level preemption by the parent {quota}",
    "priority": "a higher-priority job in {quota}",
    "fair_share": "fair-share reclaim among borrowers",
    "min": "{quota}'s smaller min left it Not in Quota",
}


class Unplannable(Exception):
    """The core refused the snapshot (a service above its target, until it is scaled down)."""


@dataclass(frozen=True, slots=True)
class Note:
    """A timeline entry to record about a workload."""

    workload: Workload
    kind: str
    message: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PodsEnd:
    """Live pods to end, with the status and reason they end with."""

    pods: list[Pod]
    status: str
    reason: str


@dataclass(frozen=True, slots=True)
class Eviction:
    """A preempted workload: its pods end and its row takes `values` (requeued or failed)."""

    workload: Workload
    pods_end: PodsEnd
    values: dict[str, Any]
    notes: tuple[Note, ...]  # the victim's, then its preemptor's


@dataclass(frozen=True, slots=True)
class Start:
    """An admitted workload: new pod rows on the chosen nodes, and `values` for its row."""

    workload: Workload
    pods: tuple[Pod, ...]
    values: dict[str, Any]
    notes: tuple[Note, ...]


@dataclass(frozen=True, slots=True)
class Relabel:
    """A running workload whose In Quota label changed; its live pods follow it."""

    workload: Workload
    in_quota: bool
    note: Note


@dataclass(frozen=True)
class Plan:
    """A cycle's row changes in the order they apply, and how many decisions the core made."""

    evictions: tuple[Eviction, ...]
    starts: tuple[Start, ...]
    relabels: tuple[Relabel, ...]
    reasons: dict[str, list[int]]  # a waiting reason → the workloads whose reason it becomes
    admitted: int
    preempted: int
    pending: int
    unsettled: bool  # the core ran out of admission rounds (CycleResult.unsettled)


class _Ahead:
    """Row values as the decisions planned so far leave them."""

    def __init__(self) -> None:
        self.changed: dict[int, dict[str, Any]] = defaultdict(dict)

    def get(self, w: Workload, field: str) -> Any:
        """The field's value once the planned changes apply."""
        values = self.changed.get(w.pk)
        return values[field] if values and field in values else getattr(w, field)

    def set(self, w: Workload, values: Mapping[str, Any]) -> None:
        """Record planned values of the row."""
        self.changed[w.pk].update(values)


def cycle_plan(now: datetime, *, phase: Callable[[str, float], None] | None = None) -> Plan:
    """Snapshot the database, run the core on it and plan the row changes it decided.

    `phase`, if given, is told the seconds the snapshot and the core (with the planning of
    row changes) took, for the cycle's metrics.
    """
    started = time.perf_counter()
    reading = build(now)
    read = time.perf_counter()
    try:
        result = run_cycle(reading.snapshot)
    except ScenarioError as error:
        raise Unplannable(str(error)) from error
    planned = plan(reading, result, now)
    if phase is not None:
        phase("snapshot", read - started)
        phase("core", time.perf_counter() - read)
    return planned


def plan(reading: Reading, result: CycleResult, now: datetime) -> Plan:
    """The row changes of the core's decisions on `reading`."""
    rows, ahead = reading.workloads, _Ahead()
    evictions = tuple(_evict(p, rows, ahead, now) for p in result.preempted)
    return Plan(
        evictions,
        _starts(result.admitted, reading, ahead, now),
        _relabels(result.classification, rows, ahead),
        _reasons(result.pending, rows, ahead),
        len(result.admitted),
        len(result.preempted),
        len(result.pending),
        result.unsettled,
    )


def _evict(p: Preemption, rows: dict[str, WorkloadInfo], ahead: _Ahead, now: datetime) -> Eviction:
    """A victim's pods end Resource Preempted; it rolls back to its checkpoint and requeues
    if fault tolerance allows, else fails."""
    info = rows[p.workload]
    victim = info.workload
    preemptor = rows.get(p.by)
    # members read the sentence: a job by its own name, never the core's workspace/name
    by = preemptor.workload.name if preemptor else short_name(p.by)
    about = p.quota or victim.quota.name
    about = about if about.lower().startswith("quota") else f"Quota {about}"
    why = REASON_TEXT.get(p.reason, p.reason).format(quota=about)
    # the core's work_lost, the figure its victim order ranked by (as restarts count it)
    lost = p.work_lost_gpu_seconds
    restarts, ended_at = ahead.get(victim, "restarts"), ahead.get(victim, "ended_at")
    requeue = victim.fault_tolerance and victim.restart_on_preemption
    if requeue:
        status, restarts = Status.REQUEUED, restarts + 1
        status_reason = f"Preempted by {by} ({why}); requeued from its last checkpoint."
    else:
        status, ended_at = Status.FAILED, now
        status_reason = f"Preempted by {by} ({why}); fault tolerance is off."
    values = {
        "progress": victim.checkpoint_progress,
        "last_progress_at": None,
        "in_quota": None,
        "status": status,
        "status_reason": status_reason,
        "restarts": restarts,
        "ended_at": ended_at,
    }
    ahead.set(victim, values)
    notes = [
        Note(
            victim,
            EventKind.PREEMPTED,
            f"Preempted by {by}: {why}. {lost_text(victim, lost)} "
            f"{'Requeued.' if requeue else 'Failed (Preempted).'}",
            {
                "by": by,
                "reason": p.reason,
                "work_lost_gpu_seconds": lost,
                "checkpoint": victim.checkpoint_label,
            },
        )
    ]
    if preemptor is not None:
        notes.append(
            Note(
                preemptor.workload,
                EventKind.PREEMPTOR,
                f"Preempted {victim.name} ({why}) to make room.",
                {"victim": victim.name, "reason": p.reason},
            )
        )
    pods_end = PodsEnd(info.live_pods, PodStatus.PREEMPTED, f"Resource Preempted by {by}: {why}")
    return Eviction(victim, pods_end, values, tuple(notes))


def _starts(
    admissions: tuple[Admission, ...], reading: Reading, ahead: _Ahead, now: datetime
) -> tuple[Start, ...]:
    """The admitted workloads' pods and rows; each new pod continues its workload's indexes."""
    admitted = [(a, reading.workloads[a.workload].workload) for a in admissions]
    # Evicted earlier this cycle with fault tolerance off: those ended Failed.
    admitted = [(a, w) for a, w in admitted if ahead.get(w, "status") not in ENDED_STATUSES]
    started = {w.pk for _, w in admitted}
    top = Pod.objects.filter(workload__in=started).values("workload").annotate(top=Max("index"))
    next_index = {r["workload"]: r["top"] + 1 for r in top}
    return tuple(_start(a, w, reading.nodes, next_index, ahead, now) for a, w in admitted)


def _start(
    a: Admission,
    w: Workload,
    nodes: dict[str, Node],
    next_index: dict[int, int],
    ahead: _Ahead,
    now: datetime,
) -> Start:
    """Start a workload (or more replicas of a service) on the chosen nodes."""
    first_index = next_index.get(w.pk, 0)
    next_index[w.pk] = first_index + len(a.placements)
    attempt = ahead.get(w, "restarts")
    pods = tuple(
        Pod(
            workload=w,
            index=first_index + i,
            attempt=attempt,
            node_id=nodes[placement.node].pk,
            devices=list(placement.devices),
            status=PodStatus.PENDING,
            borrowed=not a.in_quota,
            # a requeued job resumes from its last reported checkpoint (TIDEPOOL_RESUME_FROM)
            resume_from=w.checkpoint_label,
            created_at=now,
        )
        for i, placement in enumerate(a.placements)
    )
    status = ahead.get(w, "status")
    values: dict[str, Any] = {"in_quota": a.in_quota, "pending_reason": ""}
    if status != Status.RUNNING:
        # started_at is this attempt's start: the classification ranks by it
        values |= {
            "status": Status.RUNNING,
            "status_reason": "",
            "started_at": now,
            "last_progress_at": now,
            "last_checkpoint_at": now,
        }
    ahead.set(w, values)
    label = "In Quota" if a.in_quota else "Not in Quota (borrowed idle capacity)"
    nodes_used = [pl.node for pl in a.placements]
    # Members read the message: a borrowed placement names no node (jobs.visibility).
    where = ", ".join(sorted(set(nodes_used))) if a.in_quota else "idle capacity"
    notes = [
        Note(w, EventKind.ADMITTED, f"Admitted {label}.", {"in_quota": a.in_quota}),
        Note(
            w,
            EventKind.PLACED,
            f"{times(len(pods), 'replica')} placed on {where}.",
            placement_data(nodes_used, borrowed=not a.in_quota),
        ),
    ]
    if status == Status.REQUEUED and w.kind == Kind.TRAINING and w.total_work:
        progress, label = ahead.get(w, "progress"), w.checkpoint_label
        # the list and the job page show percent() of the same progress
        at = f"at {percent(progress, w.total_work)}% progress"
        text = (
            f"Resumed from its last checkpoint {at} ({label})."
            if label
            else f"Started again from the beginning ({NO_CHECKPOINT}) {at}."
        )
        notes.append(Note(w, EventKind.RESUMED, text, {"progress": progress, "resume_from": label}))
    return Start(w, pods, values, tuple(notes))


def _relabels(
    classification: Mapping[str, bool], rows: dict[str, WorkloadInfo], ahead: _Ahead
) -> tuple[Relabel, ...]:
    """The In Quota / Not in Quota label of running workloads, where it changed."""
    relabels = []
    for name, in_quota in classification.items():
        info = rows.get(name)
        if info is None:
            continue
        w = info.workload
        if ahead.get(w, "in_quota") == in_quota or ahead.get(w, "status") != Status.RUNNING:
            continue
        ahead.set(w, {"in_quota": in_quota})
        label = "In Quota" if in_quota else "Not in Quota (preemptible)"
        note = Note(w, EventKind.ADMITTED, f"Now {label}.", {"in_quota": in_quota, "label": True})
        relabels.append(Relabel(w, in_quota, note))
    return tuple(relabels)


def _reasons(
    pending: tuple[Pending, ...], rows: dict[str, WorkloadInfo], ahead: _Ahead
) -> dict[str, list[int]]:
    """Each waiting workload's reason sentence, where it changed, grouped by sentence.

    The waiting jobs of a quota mostly share theirs, so the service stores a sentence's
    rows in one UPDATE: a bulk_update of many rows (a CASE per row) was a good part of a
    cycle's time.
    """
    changed: dict[str, list[int]] = defaultdict(list)
    for p in pending:
        info = rows.get(p.workload)
        reason = p.reason[:300]
        if info is None or ahead.get(info.workload, "status") in ENDED_STATUSES:
            continue  # a victim that fails (fault tolerance off) waits for nothing
        if ahead.get(info.workload, "pending_reason") != reason:
            ahead.set(info.workload, {"pending_reason": reason})
            changed[reason].append(info.workload.pk)
    return dict(changed)
