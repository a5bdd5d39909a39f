"""Queue order: per quota (priority then FIFO, or FIFO), then heads merged across quotas."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from .tree import QuotaTree
from .types import Workload


def fifo_key(w: Workload) -> tuple[float, str]:
    """Oldest submission first."""
    return (w.submitted_at, w.name)


def priority_key(w: Workload) -> tuple[int, float, str]:
    """Highest priority first, then oldest submission."""
    return (-w.priority, w.submitted_at, w.name)


def is_waiting(w: Workload) -> bool:
    """Pending workloads and inference services short of their target replicas."""
    if not w.running:
        return True
    return w.kind == "inference" and len(w.running) < w.replicas


def queue_order(tree: QuotaTree, workloads: Iterable[Workload]) -> list[Workload]:
    """All waiting workloads, each quota's queue in its own order, heads merged by priority."""
    queues: dict[str, list[Workload]] = {}
    for w in workloads:
        if is_waiting(w):
            queues.setdefault(w.quota, []).append(w)
    ordered: list[list[Workload]] = []
    for name in sorted(queues):
        q = queues[name]
        if tree.quotas[name].queue == "fifo":
            q.sort(key=fifo_key)
        else:
            q.sort(key=priority_key)
        ordered.append(q)
    # heapq.merge compares heads only, so a FIFO queue keeps its own order.
    return list(heapq.merge(*ordered, key=priority_key))
