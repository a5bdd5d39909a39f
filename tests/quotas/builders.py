"""Small helpers for quota tests: GPU amounts and independent reads of the tree."""

from __future__ import annotations

from typing import Any

from cluster.models import Node, NodePool
from cluster.services import node_create, node_pool_create
from quotas.amounts import Amounts
from quotas.models import Quota, QuotaAudit, QuotaResource
from quotas.services.quotas import quota_update


def gpus(n: float, max_gpus: float | None = None) -> Amounts:
    """Amounts of n GPUs guaranteed (and optionally a GPU limit)."""
    return Amounts(
        min_gpu=int(n * 1000), max_gpu=None if max_gpus is None else int(max_gpus * 1000)
    )


def min_gpus(name: str) -> float:
    """A quota's guaranteed GPUs on its (single) node pool, read from the DB."""
    row = QuotaResource.objects.get(quota__name=name)
    return row.min_gpu / 1000


def dump() -> dict[str, Any]:
    """Every quota, resource, allowed node pool and audit row, to compare before and after a
    refused change."""
    return {
        "quotas": list(Quota.objects.order_by("pk").values()),
        "resources": list(QuotaResource.objects.order_by("pk").values()),
        "allowed_node_pools": list(
            Quota.allowed_node_pools.through.objects.order_by("pk").values()
        ),
        "audit": QuotaAudit.objects.count(),
    }


def tree_violations() -> list[str]:
    """Every broken tree invariant, computed from the rows, independently of the services."""
    problems: list[str] = []
    quotas = {q.pk: q for q in Quota.objects.all()}
    rows = list(QuotaResource.objects.select_related("node_pool"))
    mins: dict[tuple[int, int, str], int] = {}
    for row in rows:
        for r in ("gpu", "cpu", "memory"):
            mins[(row.quota_id, row.node_pool_id, r)] = getattr(row, f"min_{r}")
            limit = getattr(row, f"max_{r}")
            if limit is not None and limit < getattr(row, f"min_{r}"):
                problems.append(f"{quotas[row.quota_id].name} max {r} below min")
        if row.node_pool.resource_pool_id != quotas[row.quota_id].resource_pool_id:
            problems.append(f"{quotas[row.quota_id].name} uses a foreign node pool")
    node_pools = {row.node_pool_id for row in rows}
    capacity: dict[tuple[int, str], int] = {}
    for node in Node.objects.filter(schedulable=True):
        for r, v in (("gpu", node.gpus * 1000), ("cpu", node.cpu), ("memory", node.memory)):
            capacity[(node.node_pool_id, r)] = capacity.get((node.node_pool_id, r), 0) + v
    for q in quotas.values():
        seen = {q.pk}
        p = q.parent_id
        while p is not None:
            if p in seen:
                problems.append(f"{q.name} is in a cycle")
                break
            seen.add(p)
            p = quotas[p].parent_id
        if q.parent_id and quotas[q.parent_id].resource_pool_id != q.resource_pool_id:
            problems.append(f"{q.name}'s parent is in another resource pool")
    problems.extend(_pool_list_violations(quotas, mins))
    for np_id in node_pools:
        for r in ("gpu", "cpu", "memory"):
            roots = sum(mins.get((q.pk, np_id, r), 0) for q in quotas.values() if not q.parent_id)
            if roots > capacity.get((np_id, r), 0):
                problems.append(f"roots hold {roots} {r} > capacity {capacity.get((np_id, r))}")
            for parent in quotas.values():
                kids = sum(
                    mins.get((c.pk, np_id, r), 0)
                    for c in quotas.values()
                    if c.parent_id == parent.pk
                )
                if kids > mins.get((parent.pk, np_id, r), 0):
                    problems.append(f"children of {parent.name} hold {kids} {r}")
    return problems


def _pool_list_violations(
    quotas: dict[int, Quota], mins: dict[tuple[int, int, str], int]
) -> list[str]:
    """Children allowed pools their parent is not, and mins in pools a quota may not use."""
    own: dict[int, set[int]] = {}
    for quota_id, pool_id in Quota.allowed_node_pools.through.objects.values_list(
        "quota_id", "nodepool_id"
    ):
        own.setdefault(quota_id, set()).add(pool_id)

    def in_effect(pk: int | None) -> set[int] | None:
        result: set[int] | None = None
        while pk is not None:
            if pk in own:
                result = set(own[pk]) if result is None else result & own[pk]
            pk = quotas[pk].parent_id
        return result

    problems = []
    for q in quotas.values():
        above = in_effect(q.parent_id)
        if q.pk in own and above is not None and not own[q.pk] <= above:
            problems.append(f"{q.name} allows a node pool its parent does not")
        mine = in_effect(q.pk)
        for (quota_id, pool_id, _), value in mins.items():
            if quota_id == q.pk and value and mine is not None and pool_id not in mine:
                problems.append(f"{q.name} guarantees a node pool it may not use")
                break
    return problems


def add_t4(demo: Any) -> NodePool:
    """A second node pool of the demo's resource pool: two 4-GPU T4 nodes."""
    pool = node_pool_create(resource_pool=demo.resource_pool, name="T4", gpu_model="T4")
    for i in (1, 2):
        node_create(node_pool=pool, name=f"t4-{i}", gpus=4, cpu=32_000, memory=131_072)
    return pool


def restrict(admin: Any, name: str, *pools: NodePool) -> Quota:
    """Set a quota's allowed node pools through the service."""
    return quota_update(actor=admin, quota=Quota.objects.get(name=name), allowed_node_pools=pools)


def allowed(name: str) -> list[str]:
    """A quota's own allowed node pools, read from the database."""
    return sorted(Quota.objects.get(name=name).allowed_node_pools.values_list("name", flat=True))
