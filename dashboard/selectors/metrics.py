"""Every quota's figures per node pool now, for the /metrics scrape (4 queries for any size).

The figures are those of the quota pages: a workload counts against its quota and every
ancestor (dashboard.selectors.quotas.subtree_usage), and In Quota and borrowed split live
pods by their workload's label (quota_pool_usage). Amounts are in the database's units
(milli-GPU, millicores, MiB); console.metrics_view converts them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Min, Sum

from jobs.choices import LIVE_POD_STATUSES, WAITING_STATUSES
from jobs.models import Pod, Workload
from quotas.models import Quota, QuotaResource

# A waiting workload that may run in several node pools (or any) is counted under this pool.
ANY_POOL = "any"
# Live pods with no node (never bound), as quota_pool_usage names them.
NO_NODE = "—"

Triple = list[int]  # gpu, cpu, memory


def _zero() -> Triple:
    return [0, 0, 0]


@dataclass
class PoolFigures:
    """One quota's figures on one node pool (subtree usage; own guarantee and limit)."""

    guaranteed: Triple = field(default_factory=_zero)
    limit: list[int | None] = field(default_factory=lambda: [None, None, None])
    allocated: Triple = field(default_factory=_zero)
    borrowed: Triple = field(default_factory=_zero)
    pending: Triple = field(default_factory=_zero)
    running: int = 0
    waiting: int = 0
    running_borrowed: int = 0
    has_amounts: bool = False


@dataclass
class QuotaFigures:
    """Every quota's figures by node pool, and what each pool's workloads borrow in all."""

    names: dict[int, str]
    parents: dict[int, int | None]
    lend_idle: dict[int, bool]
    pools: dict[int, dict[str, PoolFigures]]
    pool_borrowed: dict[str, Triple]

    def lent(self, quota_id: int, pool: str) -> Triple:
        """What of the quota's idle guarantee on the pool others borrow, at most.

        Idle guarantee is guaranteed less allocated In Quota (0 if it does not lend idle);
        others are the Not-in-Quota workloads outside its subtree on the pool.
        """
        figures = self.pools[quota_id][pool]
        if not self.lend_idle.get(quota_id, True):
            return _zero()
        others = self.pool_borrowed.get(pool, _zero())
        return [
            max(
                0,
                min(figures.guaranteed[i] - figures.allocated[i], others[i] - figures.borrowed[i]),
            )
            for i in range(3)
        ]


def _chain(pk: int, parents: dict[int, int | None]) -> list[int]:
    """The quota and its ancestors."""
    chain: list[int] = []
    node: int | None = pk
    while node is not None and len(chain) < 64:
        chain.append(node)
        node = parents.get(node)
    return chain


def quota_figures() -> QuotaFigures:
    """Guaranteed, limit, allocated In Quota, borrowed, pending demand and workload counts of
    every quota on every node pool it has amounts on or uses (4 queries)."""
    names: dict[int, str] = {}
    parents: dict[int, int | None] = {}
    lend_idle: dict[int, bool] = {}
    for pk, name, parent_id, lends in Quota.objects.values_list(
        "pk", "name", "parent_id", "lend_idle"
    ):
        names[pk], parents[pk], lend_idle[pk] = name, parent_id, lends
    pools: dict[int, dict[str, PoolFigures]] = {pk: {} for pk in names}
    own_pools: dict[int, list[str]] = defaultdict(list)

    def at(pk: int, pool: str) -> PoolFigures:
        row = pools[pk].get(pool)
        if row is None:
            row = pools[pk][pool] = PoolFigures()
        return row

    for row in QuotaResource.objects.values_list(
        "quota_id",
        "node_pool__name",
        "min_gpu",
        "min_cpu",
        "min_memory",
        "max_gpu",
        "max_cpu",
        "max_memory",
    ):
        quota_id, pool = row[0], row[1]
        figures = at(quota_id, pool)
        figures.has_amounts = True
        figures.guaranteed = [row[2], row[3], row[4]]
        figures.limit = [row[5], row[6], row[7]]
        own_pools[quota_id].append(pool)

    chains = {pk: _chain(pk, parents) for pk in names}
    pool_borrowed: dict[str, Triple] = defaultdict(_zero)
    live: Any = (
        Pod.objects.filter(status__in=LIVE_POD_STATUSES)
        .values_list("workload__quota_id", "node__node_pool__name", "workload__in_quota")
        .annotate(
            gpu=Sum("workload__gpu"),
            cpu=Sum("workload__cpu"),
            memory=Sum("workload__memory"),
            workloads=Count("workload_id", distinct=True),
        )
        .order_by()
    )
    for quota_id, pool, in_quota, gpu, cpu, memory, workloads in live:
        pool = pool or NO_NODE
        amounts = (gpu or 0, cpu or 0, memory or 0)
        if not in_quota:
            total = pool_borrowed[pool]
            for i in range(3):
                total[i] += amounts[i]
        for pk in chains.get(quota_id, ()):
            figures = at(pk, pool)
            target = figures.allocated if in_quota else figures.borrowed
            for i in range(3):
                target[i] += amounts[i]
            figures.running += workloads
            if not in_quota:
                figures.running_borrowed += workloads

    waiting: Any = (
        Workload.objects.filter(status__in=WAITING_STATUSES)
        .values_list("pk", "quota_id", "gpu", "cpu", "memory", "replicas")
        .annotate(pools=Count("node_pools"), pool=Min("node_pools__name"))
        .order_by()
    )
    for _, quota_id, gpu, cpu, memory, replicas, named, first in waiting:
        if named == 1:
            pool = first
        elif named == 0 and len(own_pools.get(quota_id, ())) == 1:
            pool = own_pools[quota_id][0]
        else:
            pool = ANY_POOL
        amounts = (gpu * replicas, cpu * replicas, memory * replicas)
        for pk in chains.get(quota_id, ()):
            figures = at(pk, pool)
            for i in range(3):
                figures.pending[i] += amounts[i]
            figures.waiting += 1
    return QuotaFigures(names, parents, lend_idle, pools, dict(pool_borrowed))
