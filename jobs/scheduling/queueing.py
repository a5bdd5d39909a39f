"""Queue order: per quota (priority then FIFO, or FIFO), then heads merged across quotas."""

from __future__ import annotations

from collections.abc import Iterable

from .classify import OKEY, rank, subtree_order
from .snapshot import Entry
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
    # merged by heads only, so a FIFO queue keeps its own order
    return merge_heads(ordered)


def rank_order(tree: QuotaTree, queue: list[Workload], now: float) -> list[Workload]:
    """The queue re-ordered as the classification will rank the admissions.

    In-Quota admissions are taken in this order, so an admission never takes the In-Quota
    room of a workload that ranks ahead of it (a parent's own workloads under child
    preemption, non-preemptible ones, higher priority); that one would claim the room in the
    next cycle and flip the label, or evict. This holds in FIFO quotas too: a low-priority
    job admitted first would be evicted by the higher-priority one in the next cycle (priority
    preemption), so FIFO orders the borrowers and the waiting list only.
    """
    direct: dict[str, list[Entry]] = {}
    for w in queue:
        e = Entry(w, [], False)
        e.okey = rank(e, now)
        direct.setdefault(w.quota, []).append(e)
    for own in direct.values():
        own.sort(key=OKEY)  # every okey is set just above
    streams = [[e.w for e in subtree_order(tree, r, direct)] for r in tree.roots()]
    return merge_heads(streams)


def merge_heads(streams: list[list[Workload]]) -> list[Workload]:
    """What heapq.merge(*streams, key=priority_key) yields, by one stable sort.

    A merge by heads emits each element at its stream's running maximum of the key (see
    classify._merge); keys are unique (they end in the name), so equal maxima only occur
    within one stream, where the stable sort keeps stream order. Compiled, this is several
    times cheaper than heapq.merge, a Python generator calling the key per element.
    """
    if len(streams) == 1:  # a single root's stream, say: nothing to merge
        return list(streams[0])
    flat: list[Workload] = []
    tops: list[tuple[int, float, str]] = []
    for stream in streams:
        top: tuple[int, float, str] | None = None
        for w in stream:
            k = priority_key(w)
            if top is None or k > top:
                top = k
            flat.append(w)
            tops.append(top)
    order = sorted(range(len(flat)), key=tops.__getitem__)
    return [flat[i] for i in order]
