"""Room for a new job, as the core sees the cluster now: what is free In Quota, what is idle
to borrow, for the submit form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from jobs.bridge.snapshot import UNLIMITED, _cluster, active_workloads, to_core_workload
from jobs.choices import Status
from jobs.scheduling import types as core
from jobs.scheduling.admission import idle_gpu
from jobs.scheduling.classify import label_running
from jobs.scheduling.snapshot import State
from jobs.scheduling.types import ScenarioError
from quotas.models import Quota


@dataclass(frozen=True)
class Room:
    """A quota's room in one node pool, in milli-GPU."""

    pool: str
    free_in_quota: int  # the least min left along the chain: a job this size runs In Quota
    idle: int  # idle capacity the quota may borrow, within its chain's max
    limit_left: int | None  # what the chain's max leaves (None: no max)


def _running(now: datetime) -> core.Snapshot:
    """The cluster with its running workloads only: the waiting ones hold nothing, and a
    snapshot of them all is most of the cost on a long queue."""
    cluster = _cluster(now)
    running = [
        i
        for i in active_workloads({q.pk: q for q in cluster.quotas}, statuses=(Status.RUNNING,))
        if i.live_pods
    ]
    return core.Snapshot(
        now=now.timestamp(),
        nodes=cluster.core_nodes,
        quotas=cluster.core_quotas,
        workloads=tuple(to_core_workload(i) for i in running),
        idle_scope=cluster.idle_scope,
    )


def submit_room(quotas: Sequence[Quota], *, now: datetime) -> dict[int, list[Room]]:
    """Per quota id, its room in every pool it may use (one snapshot; empty when the state
    cannot be read, as while a service is above its target)."""
    try:
        state = State(_running(now))
        label_running(state)  # the labels as the next cycle would see them
    except ScenarioError:
        return {}
    tree = state.tree
    out: dict[int, list[Room]] = {}
    for quota in quotas:
        name = quota.name
        if name not in tree.quotas:
            continue
        rooms = []
        for pool in sorted(state.pools):
            if not tree.allows(name, pool):
                continue
            free = min(
                tree.min_of(a, pool)[0] - state.used(state.inq, a, pool)[0]
                for a in tree.chain[name]
            )
            left: int | None = None
            for a in tree.chain[name]:
                cap = tree.max_of(a, pool)
                if cap is not None and cap[0] < UNLIMITED:
                    rest = cap[0] - state.used(state.usage, a, pool)[0]
                    left = rest if left is None else min(left, rest)
            idle = idle_gpu(state, name, pool)
            if left is not None:
                idle, free = min(idle, left), min(free, left)
            rooms.append(Room(pool, max(free, 0), max(idle, 0), left))
        out[quota.pk] = rooms
    return out
