"""What a quota's subtree holds and runs now, and what a change to it would do to running jobs.

The quota pages and the quota API read workloads and pods through these; quotas itself never
imports jobs (tests/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db import transaction
from django.db.models import Case, Count, F, IntegerField, Q, QuerySet, Sum, Value, When

from cluster.models import Node, NodePool
from jobs.bridge.preview import scale_preview
from jobs.choices import ACTIVE_STATUSES, LIVE_POD_STATUSES, WAITING_STATUSES, Status
from jobs.models import Pod, Workload
from quotas.amounts import Amounts
from quotas.models import Quota, QuotaResource
from quotas.selectors import quota_amounts, row_amounts
from quotas.services.quotas import quota_rebalance, quota_scale


def subtree_usage() -> dict[int, tuple[int, int, int]]:
    """(In Quota, borrowed, pending) milli-GPU of every quota's subtree (3 queries).

    A workload counts against its quota and every ancestor (DESIGN's hierarchical rule), so a
    parent's usage includes its children's. In Quota and borrowed count live pods; pending
    counts the requests of waiting workloads.
    """
    parent: dict[int, int | None] = dict(Quota.objects.values_list("pk", "parent_id"))
    own: dict[int, list[int]] = {pk: [0, 0, 0] for pk in parent}
    live: Any = (
        Pod.objects.filter(status__in=LIVE_POD_STATUSES)
        .values_list("workload__quota_id", "borrowed")
        .annotate(gpu=Sum("workload__gpu"))
        .order_by()
    )
    for quota_id, borrowed, gpu in live:
        own[quota_id][1 if borrowed else 0] += gpu or 0
    waiting: Any = (
        Workload.objects.filter(status__in=WAITING_STATUSES)
        .values_list("quota_id")
        .annotate(gpu=Sum(F("gpu") * F("replicas")))
        .order_by()
    )
    for quota_id, gpu in waiting:
        own[quota_id][2] += gpu or 0
    total: dict[int, list[int]] = {pk: [0, 0, 0] for pk in parent}
    for pk, amounts in own.items():
        node: int | None = pk
        while node is not None:
            row = total[node]
            for i, amount in enumerate(amounts):
                row[i] += amount
            node = parent[node]
    return {pk: (row[0], row[1], row[2]) for pk, row in total.items()}


def attach_usage(quotas: Iterable[Quota]) -> None:
    """Set usage_in_quota, usage_borrowed and usage_pending on each quota for the serializer."""
    usage = subtree_usage()
    for quota in quotas:
        in_quota, borrowed, pending = usage.get(quota.pk, (0, 0, 0))
        # read by UsageSerializer; not model fields
        setattr(quota, "usage_in_quota", in_quota)  # noqa: B010
        setattr(quota, "usage_borrowed", borrowed)  # noqa: B010
        setattr(quota, "usage_pending", pending)  # noqa: B010


@dataclass
class PoolUsage:
    """Guaranteed vs allocated vs borrowed on one node pool, in milli-GPU.

    Allocated counts live pods of In-Quota workloads, borrowed those of Not-in-Quota ones;
    `own_*` are workloads submitted to the quota itself, `subtree_*` include its descendants.
    """

    node_pool: str
    guaranteed: int = 0
    limit: int | None = None
    own_allocated: int = 0
    own_borrowed: int = 0
    subtree_allocated: int = 0
    subtree_borrowed: int = 0

    @property
    def subtree_total(self) -> int:
        """Everything the subtree holds on the pool."""
        return self.subtree_allocated + self.subtree_borrowed

    @property
    def allocated_share(self) -> float:
        """Allocated In Quota as a percentage of guaranteed (capped at 100 for the bar)."""
        if not self.guaranteed:
            return 0.0
        return min(100.0, 100.0 * self.subtree_allocated / self.guaranteed)


NO_NODE = "—"


def quota_pool_usage(quota: Quota, subtree_ids: list[int]) -> list[PoolUsage]:
    """Per node pool of the quota: guaranteed, allocated and borrowed (2 queries)."""
    pools: dict[str, PoolUsage] = {}
    for row in QuotaResource.objects.filter(quota=quota).select_related("node_pool"):
        pools[row.node_pool.name] = PoolUsage(
            row.node_pool.name, guaranteed=row.min_gpu, limit=row.max_gpu
        )
    held = (
        Pod.objects.filter(status__in=LIVE_POD_STATUSES, workload__quota_id__in=subtree_ids)
        .values_list("node__node_pool__name", "workload__quota_id", "workload__in_quota")
        .annotate(gpu=Sum("workload__gpu"))
        .order_by()
    )
    for pool_name, quota_id, in_quota, gpu in held:
        usage = pools.setdefault(pool_name or NO_NODE, PoolUsage(pool_name or NO_NODE))
        own = quota_id == quota.pk
        if in_quota:
            usage.subtree_allocated += gpu or 0
            usage.own_allocated += (gpu or 0) if own else 0
        else:
            usage.subtree_borrowed += gpu or 0
            usage.own_borrowed += (gpu or 0) if own else 0
    return sorted(pools.values(), key=lambda u: u.node_pool)


@dataclass
class NodeHolding:
    """One node of the quota's pools and what the quota's subtree holds on it, in milli-GPU."""

    pk: int
    name: str
    node_pool: str
    gpus: int
    schedulable: bool
    in_quota: int = 0
    borrowed: int = 0
    others: int = 0
    workloads: int = 0

    @property
    def capacity(self) -> int:
        """The node's GPUs in milli-GPU."""
        return self.gpus * 1000

    @property
    def held(self) -> int:
        """What the quota's subtree holds here."""
        return self.in_quota + self.borrowed

    @property
    def free(self) -> int:
        """What nobody holds."""
        return max(0, self.capacity - self.held - self.others)


@dataclass
class QuotaNodes:
    """The nodes of a quota's node pools, with the quota's holdings on each."""

    nodes: list[NodeHolding]

    @property
    def nodes_held(self) -> int:
        """Nodes where the quota's subtree holds something."""
        return sum(1 for n in self.nodes if n.held)

    @property
    def in_quota(self) -> int:
        """milli-GPU held In Quota over all nodes."""
        return sum(n.in_quota for n in self.nodes)

    @property
    def borrowed(self) -> int:
        """milli-GPU held Not in Quota over all nodes."""
        return sum(n.borrowed for n in self.nodes)


def quota_nodes(quota: Quota, subtree_ids: list[int]) -> QuotaNodes:
    """Nodes of the node pools the quota has amounts on, with its holdings (3 queries)."""
    pool_ids = list(
        QuotaResource.objects.filter(quota=quota).values_list("node_pool_id", flat=True)
    )
    nodes = {
        pk: NodeHolding(pk, name, pool, gpus, schedulable)
        for pk, name, pool, gpus, schedulable in Node.objects.filter(node_pool_id__in=pool_ids)
        .order_by("node_pool__name", "name")
        .values_list("pk", "name", "node_pool__name", "gpus", "schedulable")
    }
    mine = set(subtree_ids)
    held = (
        Pod.objects.filter(status__in=LIVE_POD_STATUSES, node__node_pool_id__in=pool_ids)
        .values_list("node_id", "workload__quota_id", "workload__in_quota")
        .annotate(gpu=Sum("workload__gpu"), workloads=Count("workload_id", distinct=True))
        .order_by()
    )
    for node_id, quota_id, in_quota, gpu, workloads in held:
        node = nodes.get(node_id)
        if node is None:
            continue
        if quota_id not in mine:
            node.others += gpu or 0
        elif in_quota:
            node.in_quota += gpu or 0
            node.workloads += workloads
        else:
            node.borrowed += gpu or 0
            node.workloads += workloads
    return QuotaNodes(list(nodes.values()))


JOBS_PER_PAGE = 50


@dataclass
class QuotaJobs:
    """One page of a quota subtree's running and pending workloads, with the counts."""

    page: Page[Workload]
    running: int
    pending: int
    running_in_quota: int
    running_borrowed: int


def quota_jobs(subtree_ids: list[int], *, page: int | str | None = 1) -> QuotaJobs:
    """Running first, then pending, newest first within each (4 queries for any count)."""
    active = Workload.objects.filter(quota_id__in=subtree_ids, status__in=ACTIVE_STATUSES)
    counts = active.aggregate(
        running=Count("pk", filter=Q(status=Status.RUNNING)),
        pending=Count("pk", filter=Q(status__in=WAITING_STATUSES)),
        running_in_quota=Count("pk", filter=Q(status=Status.RUNNING, in_quota=True)),
        running_borrowed=Count("pk", filter=Q(status=Status.RUNNING, in_quota=False)),
    )
    rows: QuerySet[Workload] = (
        active.select_related("workspace", "owner", "quota")
        .annotate(
            running_first=Case(
                When(status=Status.RUNNING, then=Value(0)),
                default=Value(1),
                output_field=IntegerField(),
            )
        )
        .order_by("running_first", "-submitted_at", "-pk")
    )
    paginator = Paginator(rows, JOBS_PER_PAGE)
    return QuotaJobs(page=paginator.get_page(page), **counts)


# --- previews of a change that may push running jobs out of quota ----------------------------


@dataclass(frozen=True)
class ScalePreview:
    """Running workloads whose label a proposed change would flip."""

    not_in_quota: list[Workload]
    in_quota: list[Workload]


class _Rollback(Exception):
    """Undo a trial change; carries what the trial found."""

    def __init__(self, found: Any = None) -> None:
        super().__init__()
        self.found = found


def quota_scale_preview(
    *,
    actor: Any,
    quota: Quota,
    resources: Mapping[NodePool, Amounts],
    now: datetime,
    expected_version: int | None = None,
) -> ScalePreview:
    """What scaling `quota` to `resources` would do to running workloads; nothing is changed.

    quota_scale runs first in a savepoint that is rolled back, so a change the service would
    refuse is refused here with its message. jobs.bridge.preview.scale_preview answers which
    workloads would leave quota; asked the other way round inside the trial, which would join.
    """
    current = quota_amounts(quota)
    try:
        with transaction.atomic():
            trial = quota_scale(
                actor=actor, quota=quota, resources=resources, expected_version=expected_version
            )
            back = {np: current.get(np.pk, Amounts()) for np in resources}
            raise _Rollback(scale_preview(trial, back, now=now))
    except _Rollback as done:
        joining: list[Workload] = done.found
    return ScalePreview(not_in_quota=scale_preview(quota, resources, now=now), in_quota=joining)


def quota_rebalance_preview(
    *,
    actor: Any,
    source: Quota,
    target: Quota,
    node_pool: NodePool,
    now: datetime,
    gpu: int = 0,
    cpu: int = 0,
    memory: int = 0,
) -> ScalePreview:
    """What moving amounts from `source` to `target` would push out of quota in `source`.

    The move is tried in a savepoint that is rolled back (so refusals read as the service's),
    and the source's amounts after it are previewed with jobs.bridge.preview.scale_preview.
    """
    try:
        with transaction.atomic():
            quota_rebalance(
                actor=actor,
                source=source,
                target=target,
                node_pool=node_pool,
                gpu=gpu,
                cpu=cpu,
                memory=memory,
            )
            after = QuotaResource.objects.get(quota_id=source.pk, node_pool_id=node_pool.pk)
            raise _Rollback(row_amounts(after))
    except _Rollback as done:
        proposed: Amounts = done.found
    return ScalePreview(
        not_in_quota=scale_preview(source, {node_pool: proposed}, now=now), in_quota=[]
    )
