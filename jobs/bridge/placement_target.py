"""What the overview shows of placement: the learned target and the fragmentation per node pool."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from cluster.choices import GpuSharing
from cluster.models import Node
from jobs.bridge.snapshot import (
    TARGET_DAYS,
    TARGET_REFRESH,
    TARGET_WORKLOADS,
    learned_target,
    target_cutoff,
)
from jobs.choices import LIVE_POD_STATUSES
from jobs.models import Pod
from jobs.scheduling.fragmentation import DEFAULT_TARGET, Shape, fragmentation, hands

MILLI = 1000
TOP = 8  # shapes the overview lists


@dataclass(frozen=True, slots=True)
class PoolFragmentation:
    """One node pool: free milli-GPU on schedulable nodes, and how much of it the target's
    tasks could not use (the expected fragmentation, FGD's measure)."""

    pool: str
    free: int
    fragmented: int

    @property
    def percent(self) -> float:
        """Fragmented share of the free GPUs."""
        return 100 * self.fragmented / self.free if self.free else 0.0


@dataclass(frozen=True, slots=True)
class PlacementTarget:
    """The target placement works to (learned, or the default) and the pools' fragmentation."""

    shapes: tuple[Shape, ...]
    learned: bool
    learned_at: datetime  # the end of its window: learned again TARGET_REFRESH seconds later
    pools: tuple[PoolFragmentation, ...]
    # the window it is learned from, and how often: the bridge's constants, not per target
    days: ClassVar[int] = TARGET_DAYS
    workloads: ClassVar[int] = TARGET_WORKLOADS
    refresh_minutes: ClassVar[int] = TARGET_REFRESH // 60


def shape_label(s: Shape) -> str:
    """A task shape in words: '2 GPUs, 8 cores, 32 GiB' or '0.5 GPU'."""
    gpu = (
        f"{s.count} GPUs"
        if s.count > 1
        else ("1 GPU" if s.share == MILLI else f"{s.share / MILLI:g} GPU")
    )
    parts = [gpu]
    if s.cpu:
        parts.append(f"{s.cpu / 1000:g} cores")
    if s.mem:
        parts.append(f"{s.mem / 1024:g} GiB")
    return ", ".join(parts)


def placement_target(now: datetime) -> PlacementTarget:
    """The current target and each pool's fragmentation under it (3 queries)."""
    learned = learned_target(now)
    shapes = learned or DEFAULT_TARGET
    nodes = {n.pk: n for n in Node.objects.select_related("node_pool").filter(schedulable=True)}
    dev = {pk: [MILLI] * n.gpus for pk, n in nodes.items()}
    cpu = {pk: n.cpu for pk, n in nodes.items()}
    mem = {pk: n.memory for pk, n in nodes.items()}
    live = Pod.objects.filter(status__in=LIVE_POD_STATUSES, node_id__in=nodes)
    for node_id, devices, g, c, m in live.values_list(
        "node_id", "devices", "workload__gpu", "workload__cpu", "workload__memory"
    ):
        share = min(g, MILLI)
        for i in devices or ():
            if 0 <= i < len(dev[node_id]):
                dev[node_id][i] -= share
        cpu[node_id] -= c
        mem[node_id] -= m
    free: dict[str, int] = {}
    frag: dict[str, float] = {}
    for pk, n in nodes.items():
        pool = n.node_pool.name
        d = [max(0, x) for x in dev[pk]]
        free[pool] = free.get(pool, 0) + sum(d)
        kinds = hands(GpuSharing.shares(n.gpu_sharing), GpuSharing.whole(n.gpu_sharing))
        f = fragmentation(d, max(0, cpu[pk]), max(0, mem[pk]), pool, shapes, kinds)
        frag[pool] = frag.get(pool, 0.0) + f
    pools = tuple(PoolFragmentation(p, free[p], round(frag[p])) for p in sorted(free))
    return PlacementTarget(shapes[:TOP], bool(learned), target_cutoff(now), pools)
