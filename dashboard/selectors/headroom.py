"""What a quota uses and what is left around it, shown above the Scale and Rebalance forms.

Per node pool, in milli-GPU: the quota's guarantee and limit, what its subtree runs In Quota and
borrowed, and what its parent (or, for a root, the resource pool) has not given to any child,
which is how far its min can rise before the service refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Sum

from dashboard.selectors.quotas import quota_pool_usage
from quotas.models import Quota, QuotaResource
from quotas.selectors import quota_subtree_ids
from quotas.services.quotas import pool_capacity


@dataclass(frozen=True)
class Headroom:
    """One node pool of a quota: its usage and the room left above it, in milli-GPU."""

    node_pool: str
    guaranteed: int
    limit: int | None
    in_quota: int  # live pods of the subtree's In-Quota workloads
    borrowed: int  # live pods of the subtree's Not-in-Quota workloads
    parent_free: int | None  # the parent's min its children leave; None for a root
    pool_free: int  # the node pool's capacity the root quotas leave

    @property
    def unused(self) -> int:
        """Guarantee no running In-Quota workload holds: what a cut takes without harm."""
        return max(self.guaranteed - self.in_quota, 0)

    @property
    def can_rise(self) -> int:
        """How far min can go up before the parent (or the pool) refuses."""
        return self.pool_free if self.parent_free is None else self.parent_free


def _min_gpu_by_pool(quotas: list[int]) -> dict[int, int]:
    """node pool id → the sum of these quotas' min GPU."""
    rows = (
        QuotaResource.objects.filter(quota_id__in=quotas)
        .values("node_pool_id")
        .annotate(gpu=Sum("min_gpu"))
        .order_by()
    )
    return {r["node_pool_id"]: int(r["gpu"] or 0) for r in rows}


def quota_headroom(quota: Quota) -> list[Headroom]:
    """Every node pool of the quota's resource pool (a fixed number of queries)."""
    pool = quota.resource_pool
    capacity = pool_capacity(pool)
    node_pools = sorted(pool.node_pools.all(), key=lambda np: np.name)
    usage = {u.node_pool: u for u in quota_pool_usage(quota, quota_subtree_ids(quota))}
    roots = list(Quota.objects.filter(resource_pool=pool, parent=None).values_list("pk", flat=True))
    given_by_pool = _min_gpu_by_pool(roots)
    parent_min: dict[int, int] = {}
    given_by_parent: dict[int, int] = {}
    if quota.parent_id is not None:
        parent_min = _min_gpu_by_pool([quota.parent_id])
        siblings = Quota.objects.filter(parent_id=quota.parent_id).values_list("pk", flat=True)
        given_by_parent = _min_gpu_by_pool(list(siblings))
    rows = []
    for np in node_pools:
        u = usage.get(np.name)
        rows.append(
            Headroom(
                node_pool=np.name,
                guaranteed=u.guaranteed if u else 0,
                limit=u.limit if u else None,
                in_quota=u.subtree_allocated if u else 0,
                borrowed=u.subtree_borrowed if u else 0,
                parent_free=(
                    None
                    if quota.parent_id is None
                    else parent_min.get(np.pk, 0) - given_by_parent.get(np.pk, 0)
                ),
                pool_free=capacity.get(np.pk, {}).get("gpu", 0) - given_by_pool.get(np.pk, 0),
            )
        )
    return rows
