"""Reads for the platform admin's charts: usage series, allocation now, and the GPU grid.

Every function here makes a fixed number of queries, whatever the number of samples, pods
or nodes; the bucketing and the per-device bookkeeping happen in Python on narrow rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Sum

from cluster.models import Node
from cluster.selectors import schedulable_capacity
from jobs.choices import LIVE_POD_STATUSES
from jobs.models import Pod, UsageSample
from quotas.models import Quota

MILLI = 1000
WINDOW = timedelta(hours=24)
BUCKET = timedelta(minutes=5)


@dataclass(frozen=True)
class QuotaSeries:
    """One quota's usage over time, in GPUs; preemptions are per point."""

    quota_id: int
    name: str
    at: list[datetime] = field(default_factory=list)
    in_quota: list[float] = field(default_factory=list)
    borrowed: list[float] = field(default_factory=list)
    pending: list[float] = field(default_factory=list)
    preemptions: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class UsageSeries:
    """Per-quota series over the window that ends at the newest sample."""

    start: datetime | None
    end: datetime | None
    bucket: timedelta
    quotas: list[QuotaSeries]


def _floor(at: datetime, origin: datetime, bucket: timedelta) -> datetime:
    """The start of the bucket that holds `at`, with buckets counted from `origin`."""
    return origin + ((at - origin) // bucket) * bucket


def usage_series(*, window: timedelta = WINDOW, bucket: timedelta = BUCKET) -> UsageSeries:
    """Samples of the last `window` before the newest one, averaged into `bucket`s (3 queries).

    GPU counts are averaged over each bucket (a bucket is a time span, so the area stays
    honest); preemptions are summed. The window is relative to the newest sample, not to
    wall time, because the demo's simulated clock runs ahead of it.
    """
    quotas = list(Quota.objects.order_by("name").values_list("pk", "name"))
    end = UsageSample.objects.aggregate(end=Max("at"))["end"]
    if end is None:
        return UsageSeries(start=None, end=None, bucket=bucket, quotas=[])
    start = end - window
    rows = (
        UsageSample.objects.filter(at__gt=start, at__lte=end)
        .order_by("at")
        .values_list("quota_id", "at", "gpu_in_quota", "gpu_borrowed", "gpu_pending", "preemptions")
    )
    # quota → bucket start → [n, in_quota, borrowed, pending, preemptions]
    sums: dict[int, dict[datetime, list[int]]] = defaultdict(dict)
    # Buckets are aligned to `end` so the newest bucket is complete-ish and ends at `end`.
    origin = end - window
    for quota_id, at, in_quota, borrowed, pending, preempted in rows.iterator(chunk_size=5000):
        key = _floor(at - timedelta(microseconds=1), origin, bucket) + bucket
        acc = sums[quota_id].get(key)
        if acc is None:
            sums[quota_id][key] = [1, in_quota, borrowed, pending, preempted]
        else:
            acc[0] += 1
            acc[1] += in_quota
            acc[2] += borrowed
            acc[3] += pending
            acc[4] += preempted
    series = []
    for quota_id, name in quotas:
        buckets = sums.get(quota_id, {})
        keys = sorted(buckets)
        series.append(
            QuotaSeries(
                quota_id=quota_id,
                name=name,
                at=keys,
                in_quota=[_gpus(buckets[k][1], buckets[k][0]) for k in keys],
                borrowed=[_gpus(buckets[k][2], buckets[k][0]) for k in keys],
                pending=[_gpus(buckets[k][3], buckets[k][0]) for k in keys],
                preemptions=[buckets[k][4] for k in keys],
            )
        )
    return UsageSeries(start=start, end=end, bucket=bucket, quotas=series)


def _gpus(milli_total: int, count: int) -> float:
    """The mean of `count` milli-GPU readings, in GPUs, to three decimals."""
    return round(milli_total / count / MILLI, 3)


@dataclass(frozen=True)
class Allocation:
    """GPUs held by live pods against the capacity of schedulable nodes, in milli-GPU."""

    allocated: int
    capacity: int

    @property
    def share(self) -> float:
        """Allocated over capacity, 0 when there is no capacity."""
        return self.allocated / self.capacity if self.capacity else 0.0


def allocation_now() -> Allocation:
    """What live pods hold now and what schedulable nodes offer (2 queries)."""
    # The same pods usage_sample counts, so the live gauge and the page agree.
    allocated = Pod.objects.filter(status__in=LIVE_POD_STATUSES).aggregate(
        gpu=Sum("workload__gpu")
    )["gpu"]
    return Allocation(allocated=allocated or 0, capacity=schedulable_capacity())


# The grid's cell states, also its CSS classes.
FREE, FULL, SHARED, BORROWED = "free", "full", "shared", "borrowed"


@dataclass
class GridNode:
    """One node of the GPU grid: its devices' states and what it holds."""

    pk: int
    name: str
    pool: str
    schedulable: bool
    cells: list[str]
    used: int = 0  # milli-GPU

    @property
    def free_devices(self) -> int:
        """Devices nothing runs on."""
        return self.cells.count(FREE)


@dataclass(frozen=True)
class NodeGrid:
    """Every node's devices, with counts of each state for the legend."""

    nodes: list[GridNode]
    counts: dict[str, int]
    fragmented_nodes: int
    cordoned: int

    @property
    def devices(self) -> int:
        """Devices in the grid."""
        return sum(self.counts.values())


def node_grid(*, node_pool_id: int | None = None) -> NodeGrid:
    """Per-node, per-device allocation for the grid (2 queries for any cluster size).

    A device is *borrowed* if any borrowed pod uses it, *full* when whole-GPU pods (or
    fractions adding up to one) hold it, *shared* when fractional pods hold part of it.
    """
    nodes_qs = Node.objects.order_by("node_pool__name", "name")
    pods_qs = Pod.objects.filter(status__in=LIVE_POD_STATUSES, node__isnull=False)
    if node_pool_id is not None:
        nodes_qs = nodes_qs.filter(node_pool_id=node_pool_id)
        pods_qs = pods_qs.filter(node__node_pool_id=node_pool_id)
    # node → device → [milli used, borrowed?]
    use: dict[int, dict[int, list[Any]]] = defaultdict(dict)
    for node_id, devices, borrowed, gpu in pods_qs.values_list(
        "node_id", "devices", "borrowed", "workload__gpu"
    ).iterator(chunk_size=5000):
        if not devices:
            continue
        share = gpu if gpu < MILLI else MILLI
        per_node = use[node_id]
        for device in devices:
            slot = per_node.setdefault(int(device), [0, False])
            slot[0] += share
            slot[1] = slot[1] or bool(borrowed)
    counts = {FREE: 0, FULL: 0, SHARED: 0, BORROWED: 0}
    nodes: list[GridNode] = []
    fragmented = cordoned = 0
    for pk, name, pool, gpus, schedulable in nodes_qs.values_list(
        "pk", "name", "node_pool__name", "gpus", "schedulable"
    ).iterator(chunk_size=5000):
        per_node = use.get(pk, {})
        cells = []
        used = 0
        for device in range(gpus):
            milli, borrowed = per_node.get(device, (0, False))
            used += min(milli, MILLI)
            if milli <= 0:
                state = FREE
            elif borrowed:
                state = BORROWED
            elif milli < MILLI:
                state = SHARED
            else:
                state = FULL
            counts[state] += 1
            cells.append(state)
        free = cells.count(FREE)
        # Fragmented: some devices free, some in use, or a device only partly used.
        if (0 < free < gpus) or SHARED in cells:
            fragmented += 1
        if not schedulable:
            cordoned += 1
        nodes.append(
            GridNode(pk=pk, name=name, pool=pool, schedulable=schedulable, cells=cells, used=used)
        )
    return NodeGrid(nodes=nodes, counts=counts, fragmented_nodes=fragmented, cordoned=cordoned)


def quota_usage_series(
    *,
    quota_id: int,
    name: str,
    subtree_ids: list[int],
    window: timedelta = WINDOW,
    bucket: timedelta = BUCKET,
) -> UsageSeries:
    """One quota's allocation over the dashboard's window and buckets (2 queries).

    A workload counts against its quota and every ancestor, so the series adds up the
    samples of the whole subtree: each quota's bucket mean (as usage_series takes it), summed.
    """
    end = UsageSample.objects.aggregate(end=Max("at"))["end"]
    if end is None:
        return UsageSeries(start=None, end=None, bucket=bucket, quotas=[])
    start = end - window
    rows = (
        UsageSample.objects.filter(quota_id__in=subtree_ids, at__gt=start, at__lte=end)
        .order_by("at")
        .values_list("quota_id", "at", "gpu_in_quota", "gpu_borrowed", "gpu_pending", "preemptions")
    )
    # (quota, bucket start) → [n, in_quota, borrowed, pending, preemptions], as usage_series
    sums: dict[tuple[int, datetime], list[int]] = {}
    for member, at, in_quota, borrowed, pending, preempted in rows.iterator(chunk_size=5000):
        key = (member, _floor(at - timedelta(microseconds=1), start, bucket) + bucket)
        acc = sums.get(key)
        if acc is None:
            sums[key] = [1, in_quota, borrowed, pending, preempted]
        else:
            acc[0] += 1
            acc[1] += in_quota
            acc[2] += borrowed
            acc[3] += pending
            acc[4] += preempted
    # bucket → [in_quota, borrowed, pending] in mean milli-GPU, preemptions
    totals: dict[datetime, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for (_, at), (n, in_quota, borrowed, pending, preempted) in sums.items():
        total = totals[at]
        total[0] += in_quota / n
        total[1] += borrowed / n
        total[2] += pending / n
        total[3] += preempted
    keys = sorted(totals)
    series = QuotaSeries(
        quota_id=quota_id,
        name=name,
        at=keys,
        in_quota=[round(totals[k][0] / MILLI, 3) for k in keys],
        borrowed=[round(totals[k][1] / MILLI, 3) for k in keys],
        pending=[round(totals[k][2] / MILLI, 3) for k in keys],
        preemptions=[int(totals[k][3]) for k in keys],
    )
    return UsageSeries(start=start, end=end, bucket=bucket, quotas=[series])
