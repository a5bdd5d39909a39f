"""Reads of the quota tree for pages and the API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Prefetch, QuerySet

from cluster.models import NodePool, ResourcePool
from console.templatetags.tidepool import cores, gib
from console.units import milli_to_gpus
from quotas.amounts import RESOURCES, Amounts
from quotas.choices import AuditAction
from quotas.models import Quota, QuotaAudit, QuotaResource
from quotas.services.quotas import pool_capacity, pools_in_effect


@dataclass
class QuotaRow:
    """One quota of the tree with its depth and amounts per node pool."""

    quota: Quota
    depth: int
    amounts: dict[str, Amounts] = field(default_factory=dict)
    children_count: int = 0
    has_sibling: bool = False


@dataclass
class PoolTree:
    """A resource pool, its capacity, what its roots leave unassigned, and its quota rows."""

    resource_pool: ResourcePool
    node_pools: list[NodePool]
    capacity: dict[str, dict[str, int]]
    unassigned: dict[str, dict[str, int]]
    rows: list[QuotaRow]


def row_amounts(row: QuotaResource) -> Amounts:
    """A resource row as Amounts."""
    return Amounts(
        row.min_gpu, row.min_cpu, row.min_memory, row.max_gpu, row.max_cpu, row.max_memory
    )


def quota_tree_by_pool() -> list[PoolTree]:
    """Every resource pool with its quota tree in depth-first order (a fixed number of queries)."""
    pools = list(ResourcePool.objects.prefetch_related("node_pools"))
    quotas = list(Quota.objects.select_related("parent").order_by("name"))
    resources = QuotaResource.objects.select_related("node_pool")
    amounts: dict[int, dict[str, Amounts]] = {}
    for row in resources:
        amounts.setdefault(row.quota_id, {})[row.node_pool.name] = row_amounts(row)
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
        rows.append(
            QuotaRow(
                q,
                depth,
                amounts.get(q.pk, {}),
                children_count=len(children.get(q.pk, [])),
                has_sibling=len(children.get(q.parent_id, [])) > 1,
            )
        )
        stack.extend((c, depth + 1) for c in reversed(children.get(q.pk, [])))
    return rows


def node_pools_for(resource_pool: ResourcePool | None = None) -> list[NodePool]:
    """The node pools a quota form asks amounts for: one resource pool's, or all of them."""
    node_pools = NodePool.objects.select_related("resource_pool").order_by(
        "resource_pool__name", "name"
    )
    if resource_pool is not None:
        node_pools = node_pools.filter(resource_pool=resource_pool)
    return list(node_pools)


def quota_amounts(quota: Quota) -> dict[int, Amounts]:
    """A quota's amounts: node pool id → Amounts."""
    return {row.node_pool_id: row_amounts(row) for row in quota.resources.all()}


def quotas_pools_in_effect(quotas: list[Quota]) -> dict[int, dict[int, str] | None]:
    """For each quota, the node pools (id → name) it and every ancestor allow its workloads;
    None when none of them restricts its pools (1 query)."""
    rows = Quota.objects.filter(
        resource_pool_id__in={q.resource_pool_id for q in quotas}
    ).values_list("pk", "parent_id", "allowed_node_pools__pk", "allowed_node_pools__name")
    parent: dict[int, int | None] = {}
    lists: dict[int, dict[int, str]] = {}
    for pk, parent_id, pool_id, name in rows:
        parent[pk] = parent_id
        if pool_id is not None:
            lists.setdefault(pk, {})[pool_id] = name
    return {q.pk: pools_in_effect(q.pk, parent, lists) for q in quotas}


def quota_pools_in_effect(quota: Quota) -> dict[int, str] | None:
    """The node pools (id → name) the quota and every ancestor allow; None: every pool."""
    return quotas_pools_in_effect([quota])[quota.pk]


def quota_has_sibling(quota: Quota) -> bool:
    """Whether another quota shares the parent, so Rebalance has somewhere to move to."""
    return (
        Quota.objects.filter(resource_pool_id=quota.resource_pool_id, parent_id=quota.parent_id)
        .exclude(pk=quota.pk)
        .exists()
    )


def quota_siblings(quota: Quota) -> list[Quota]:
    """The other quotas with the same parent in the same resource pool."""
    return list(
        Quota.objects.filter(resource_pool_id=quota.resource_pool_id, parent_id=quota.parent_id)
        .exclude(pk=quota.pk)
        .order_by("name")
    )


@dataclass
class AuditEntry:
    """One audit record with its change spelled out line by line."""

    record: QuotaAudit
    changes: list[str]


@dataclass
class QuotaOverview:
    """What a quota's Overview page shows."""

    quota: Quota
    amounts: dict[str, Amounts]
    children: list[QuotaRow]
    workspaces: list[Any]
    audit: list[AuditEntry]
    has_sibling: bool
    # the node pools it lists itself, and those it and its ancestors allow (None: every one)
    allowed_pools: list[str] = field(default_factory=list)
    pools_in_effect: list[str] | None = None


def quota_overview(quota_id: int) -> QuotaOverview:
    """A quota with its amounts, children, bound workspaces and audit log (fixed queries)."""
    resources = QuotaResource.objects.select_related("node_pool")
    quota = (
        Quota.objects.select_related("parent", "resource_pool")
        .prefetch_related(
            Prefetch("resources", queryset=resources),
            Prefetch(
                "children",
                queryset=Quota.objects.prefetch_related(
                    Prefetch("resources", queryset=resources)
                ).order_by("name"),
            ),
            "workspaces",
            "allowed_node_pools",
            Prefetch("audit", queryset=QuotaAudit.objects.select_related("actor")),
        )
        .get(pk=quota_id)
    )
    children = [
        QuotaRow(c, 1, {r.node_pool.name: row_amounts(r) for r in c.resources.all()})
        for c in quota.children.all()
    ]
    has_sibling = quota_has_sibling(quota)
    in_effect = quota_pools_in_effect(quota)
    return QuotaOverview(
        quota=quota,
        amounts={r.node_pool.name: row_amounts(r) for r in quota.resources.all()},
        children=children,
        workspaces=list(quota.workspaces.all()),
        audit=[AuditEntry(a, audit_changes(a)) for a in quota.audit.all()],
        has_sibling=has_sibling,
        allowed_pools=sorted(np.name for np in quota.allowed_node_pools.all()),
        pools_in_effect=None if in_effect is None else sorted(in_effect.values()),
    )


RESOURCE_LABEL = {"gpu": "GPU", "cpu": "CPU cores", "memory": "memory GiB"}
SETTING_LABEL = {
    "name": "name",
    "parent": "parent",
    "over_quota_weight": "over-quota weight",
    "child_preemption": "child-level preemption",
    "lend_idle": "lend idle",
    "queue_strategy": "queue strategy",
    "allowed_node_pools": "node pools",
}


def _figure(resource: str, value: int | None) -> str:
    """One amount as people read it: GPUs, cores, GiB; None is no limit (∞)."""
    if resource == "gpu":
        return milli_to_gpus(value)
    if resource == "cpu":
        return cores(value)
    return gib(value)


def _setting(value: Any) -> str:
    """A setting as people read it."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(value) or "every pool"
    return str(value)


def _state_diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """Lines such as "A100-80G GPU min 48 → 56" for what differs between two quota states.

    A missing side (create, delete) lists the other side's settings and non-zero amounts.
    """
    lines: list[str] = []
    old, new = before or {}, after or {}
    one_sided = before is None or after is None
    for key, label in SETTING_LABEL.items():
        a, b = old.get(key), new.get(key)
        if one_sided:
            value = b if after is not None else a
            if key not in ("name", "queue_strategy") and value not in (None, False, "", []):
                lines.append(f"{label} {_setting(value)}")
        elif a != b:
            lines.append(f"{label} {_setting(a)} → {_setting(b)}")
    old_res, new_res = old.get("resources", {}), new.get("resources", {})
    for pool_name in sorted(set(old_res) | set(new_res)):
        for bound in ("min", "max"):
            for r in RESOURCES:
                a = old_res.get(pool_name, {}).get(bound, {}).get(r)
                b = new_res.get(pool_name, {}).get(bound, {}).get(r)
                label = f"{pool_name} {RESOURCE_LABEL[r]} {bound}"
                if one_sided:
                    value = b if after is not None else a
                    if value or (bound == "min" and r == "gpu" and value == 0):
                        lines.append(f"{label} {_figure(r, value)}")
                elif a != b:
                    lines.append(f"{label} {_figure(r, a)} → {_figure(r, b)}")
    return lines


def audit_changes(record: QuotaAudit) -> list[str]:
    """The change an audit record describes, line by line."""
    if record.action == AuditAction.REBALANCE:
        before, after = record.before or {}, record.after or {}
        lines: list[str] = []
        for name in sorted(set(before) | set(after)):
            lines.extend(
                f"{name}: {line}" for line in _state_diff(before.get(name), after.get(name))
            )
        return lines
    return _state_diff(record.before, record.after)


# --- the Overview's tabs: what a quota's subtree holds now -------------------------------------


def quota_subtree_ids(quota: Quota) -> list[int]:
    """The quota and all its descendants, the quota first (1 query)."""
    children: dict[int | None, list[int]] = {}
    for pk, parent_id in Quota.objects.values_list("pk", "parent_id"):
        children.setdefault(parent_id, []).append(pk)
    ids, stack = [], [quota.pk]
    while stack:
        pk = stack.pop()
        ids.append(pk)
        stack.extend(children.get(pk, []))
    return ids


def amount_changes(
    node_pools: list[NodePool], current: dict[int, Amounts], proposed: Mapping[NodePool, Amounts]
) -> list[str]:
    """Lines such as "A100-80G GPU min 48 → 24" for what a scale form changes."""
    lines = []
    for np in node_pools:
        old, new = current.get(np.pk, Amounts()), proposed.get(np, Amounts())
        for bound in ("min", "max"):
            for r in RESOURCES:
                a = old.min(r) if bound == "min" else old.max(r)
                b = new.min(r) if bound == "min" else new.max(r)
                if a != b:
                    label = f"{np.name} {RESOURCE_LABEL[r]} {bound}"
                    lines.append(f"{label} {_figure(r, a)} → {_figure(r, b)}")
    return lines


def quotas_with_amounts(queryset: QuerySet[Quota]) -> QuerySet[Quota]:
    """Quotas with their parent, resource pool, amounts per node pool and allowed node pools
    in the page's queries."""
    return queryset.select_related("parent", "resource_pool").prefetch_related(
        Prefetch("resources", queryset=QuotaResource.objects.select_related("node_pool")),
        "allowed_node_pools",
    )
