"""Reads of the quota tree for pages and the API."""

from __future__ import annotations

from dataclasses import dataclass, field

from quotas.amounts import RESOURCES, Amounts
from quotas.models import NodePool, Quota, QuotaResource, ResourcePool
from quotas.services.quotas import pool_capacity


@dataclass
class QuotaRow:
    """One quota of the tree with its depth and amounts per node pool."""

    quota: Quota
    depth: int
    amounts: dict[str, Amounts] = field(default_factory=dict)


@dataclass
class PoolTree:
    """A resource pool, its capacity, what its roots leave unassigned, and its quota rows."""

    resource_pool: ResourcePool
    node_pools: list[NodePool]
    capacity: dict[str, dict[str, int]]
    unassigned: dict[str, dict[str, int]]
    rows: list[QuotaRow]


def quota_tree_by_pool() -> list[PoolTree]:
    """Every resource pool with its quota tree in depth-first order (a fixed number of queries)."""
    pools = list(ResourcePool.objects.prefetch_related("node_pools"))
    quotas = list(Quota.objects.select_related("parent").order_by("name"))
    resources = QuotaResource.objects.select_related("node_pool")
    amounts: dict[int, dict[str, Amounts]] = {}
    for row in resources:
        amounts.setdefault(row.quota_id, {})[row.node_pool.name] = Amounts(
            row.min_gpu, row.min_cpu, row.min_memory, row.max_gpu, row.max_cpu, row.max_memory
        )
    children: dict[int | None, list[Quota]] = {}
    for q in quotas:
        children.setdefault(q.parent_id, []).append(q)

    result = []
    for pool in pools:
        rows = _walk(children, amounts, pool.pk)
        node_pools = list(pool.node_pools.all())
        by_id = pool_capacity(pool)
        capacity = {np.name: by_id.get(np.pk, {r: 0 for r in RESOURCES}) for np in node_pools}
        unassigned = {
            np.name: {
                r: capacity[np.name][r]
                - sum(row.amounts.get(np.name, Amounts()).min(r) for row in rows if row.depth == 0)
                for r in RESOURCES
            }
            for np in node_pools
        }
        result.append(PoolTree(pool, node_pools, capacity, unassigned, rows))
    return result


def _walk(
    children: dict[int | None, list[Quota]], amounts: dict[int, dict[str, Amounts]], pool_id: int
) -> list[QuotaRow]:
    """Depth-first rows of one resource pool's tree."""
    rows: list[QuotaRow] = []
    stack = [(q, 0) for q in reversed(children.get(None, [])) if q.resource_pool_id == pool_id]
    while stack:
        q, depth = stack.pop()
        rows.append(QuotaRow(q, depth, amounts.get(q.pk, {})))
        stack.extend((c, depth + 1) for c in reversed(children.get(q.pk, [])))
    return rows
