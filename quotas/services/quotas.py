"""Create, update, scale, rebalance, toggle and delete quotas; every change is checked and audited.

All writes take the scheduling state's write lock first (`cluster.locking`), so two concurrent
changes run one after the other and the second sees the first's numbers, and a scheduling
cycle never applies decisions made under the quotas as they were before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q, Sum

from cluster.locking import write_lock
from cluster.models import Node, NodePool, ResourcePool
from console.errors import DomainError, NameTaken
from console.names import check_display_name
from console.units import called
from quotas.amounts import RESOURCES, Amounts, show
from quotas.choices import AuditAction, QueueStrategy
from quotas.models import CalendarRule, Quota, QuotaAudit, QuotaResource


class StaleVersion(DomainError):
    """The caller edited an older version of the quota than the one stored."""

    def __init__(self, message: str, *, current_version: int, field: str | None = "version"):
        super().__init__(message, field=field)
        self.current_version = current_version


class AmountError(DomainError):
    """A refused amount; also names the node pool it concerns, so a form can point at it."""

    def __init__(self, message: str, *, field: str | None = None, node_pool: str | None = None):
        super().__init__(message, field=field)
        self.node_pool = node_pool


def _lock_pool(resource_pool: ResourcePool) -> ResourcePool:
    """Take the write lock, then read the resource pool as it is now."""
    write_lock()
    return ResourcePool.objects.get(pk=resource_pool.pk)


def _check_version(quota: Quota, expected_version: int | None) -> None:
    """Refuse a write based on an older version of the quota."""
    if expected_version is not None and expected_version != quota.version:
        raise StaleVersion(
            f"{called(quota.name)} is at version {quota.version}, not {expected_version}: "
            "it changed since you loaded it.",
            current_version=quota.version,
        )


def quota_state(quota: Quota) -> dict[str, Any]:
    """The quota as the audit log records it (amounts in milli-GPU, millicores, MiB)."""
    return {
        "name": quota.name,
        "parent": quota.parent.name if quota.parent_id and quota.parent else None,
        "over_quota_weight": quota.over_quota_weight,
        "child_preemption": quota.child_preemption,
        "lend_idle": quota.lend_idle,
        "queue_strategy": quota.queue_strategy,
        "allowed_node_pools": sorted(np.name for np in quota.allowed_node_pools.all()),
        "resources": {
            row.node_pool.name: row.as_dict()
            for row in quota.resources.select_related("node_pool").order_by("node_pool__name")
        },
    }


def _audit(
    actor: Any,
    quota: Quota | None,
    name: str,
    action: str,
    before: Any,
    after: Any,
    via: str = "",
) -> None:
    """Write one audit record; `via` names what made the change when no user did."""
    QuotaAudit.objects.create(
        quota=quota,
        quota_name=name,
        actor=actor if actor is not None and actor.is_authenticated else None,
        action=action,
        before=before,
        after=after,
        via=via,
    )


def _amounts_by_pool(quota_ids: list[int]) -> dict[int, dict[int, Amounts]]:
    """Load the amounts of several quotas: quota id → node pool id → Amounts."""
    result: dict[int, dict[int, Amounts]] = {qid: {} for qid in quota_ids}
    for row in QuotaResource.objects.filter(quota_id__in=quota_ids):
        result[row.quota_id][row.node_pool_id] = Amounts(
            row.min_gpu, row.min_cpu, row.min_memory, row.max_gpu, row.max_cpu, row.max_memory
        )
    return result


def pool_capacity(resource_pool: ResourcePool) -> dict[int, dict[str, int]]:
    """Capacity of each node pool of a resource pool: node pool id → resource → amount."""
    capacity: dict[int, dict[str, int]] = {
        np.pk: {r: 0 for r in RESOURCES} for np in resource_pool.node_pools.all()
    }
    rows = (
        Node.objects.filter(node_pool__resource_pool=resource_pool, schedulable=True)
        .values("node_pool_id")
        .annotate(gpu=Sum("gpus"), cpu=Sum("cpu"), memory=Sum("memory"))
    )
    for row in rows:
        capacity[row["node_pool_id"]] = {
            "gpu": int(row["gpu"] or 0) * 1000,
            "cpu": int(row["cpu"] or 0),
            "memory": int(row["memory"] or 0),
        }
    return capacity


def pools_in_effect(
    quota_id: int, parent: Mapping[int, int | None], lists: Mapping[int, Mapping[int, str]]
) -> dict[int, str] | None:
    """The node pools (id → name) a quota and every ancestor allow, from each quota's own
    list (`lists`, empty or missing: no restriction of its own); None when none restricts."""
    result: dict[int, str] | None = None
    node: int | None = quota_id
    while node is not None:
        own = lists.get(node)
        if own:
            result = dict(own) if result is None else {k: v for k, v in result.items() if k in own}
        node = parent.get(node)
    return result


def _names(pools: Mapping[int, str] | Sequence[str]) -> str:
    """Node pool names as a sentence lists them: "A100-80G, T4"."""
    names = pools.values() if isinstance(pools, Mapping) else pools
    return ", ".join(sorted(names)) or "no node pool"


def _check_allowed_pools(
    resource_pool: ResourcePool,
    quotas: list[Quota],
    focus: Quota,
    lists: dict[int, dict[int, str]],
    amounts: dict[int, dict[int, Amounts]],
    pool_names: dict[int, str],
) -> None:
    """A child only narrows its parent's node pools, and no quota guarantees a pool it may
    not use; checks about `focus` (and its children) come first."""
    parent = {q.pk: q.parent_id for q in quotas}
    by_id = {q.pk: q for q in quotas}
    for q in [focus] + [q for q in quotas if q.pk != focus.pk]:
        own = lists.get(q.pk, {})
        outside = [name for pk, name in own.items() if pk not in pool_names]
        if outside:
            raise DomainError(
                f"{called(q.name)} allows node pool {outside[0]}, which is not in resource "
                f"pool {resource_pool.name}.",
                field="allowed_node_pools",
            )
        above = pools_in_effect(q.parent_id, parent, lists) if q.parent_id else None
        wider = sorted(name for pk, name in own.items() if above is not None and pk not in above)
        if wider:
            assert above is not None and q.parent_id is not None
            up = called(by_id[q.parent_id].name)
            if q.pk == focus.pk:
                message = (
                    f"{called(q.name)} may only narrow its parent's node pools: {up} allows "
                    f"{_names(above)}, not {_names(wider)}."
                )
            else:
                message = (
                    f"{called(q.name)} allows {_names(wider)}, but its parent {up} would allow "
                    f"only {_names(above)}: narrow {called(q.name)}'s node pools first."
                )
            raise DomainError(message, field="allowed_node_pools")
        mine = pools_in_effect(q.pk, parent, lists)
        if mine is None:
            continue
        for pool_id, a in amounts[q.pk].items():
            if pool_id in mine or not any(a.min(r) for r in RESOURCES):
                continue
            r = next(r for r in RESOURCES if a.min(r))
            raise AmountError(
                f"{called(q.name)} guarantees {show(r, a.min(r))} on {pool_names[pool_id]} but "
                f"may run only in {_names(mine)}: scale that min to 0 first, or allow "
                f"{pool_names[pool_id]}.",
                field="allowed_node_pools",
                node_pool=pool_names[pool_id],
            )


def _allowed_lists(resource_pool: ResourcePool) -> dict[int, dict[int, str]]:
    """Each restricted quota's own node pools (quota id → node pool id → name), 1 query."""
    lists: dict[int, dict[int, str]] = {}
    rows = Quota.allowed_node_pools.through.objects.filter(quota__resource_pool=resource_pool)
    for quota_id, pool_id, name in rows.values_list("quota_id", "nodepool_id", "nodepool__name"):
        lists.setdefault(quota_id, {})[pool_id] = name
    return lists


def _check_tree(resource_pool: ResourcePool, focus: Quota) -> None:
    """Check every invariant of the pool's quota tree, naming the numbers of the first broken one.

    Checks that concern `focus` come first, so the message speaks of what the user changed.
    """
    quotas = list(Quota.objects.filter(resource_pool=resource_pool).order_by("name"))
    by_id = {q.pk: q for q in quotas}
    amounts = _amounts_by_pool(list(by_id))
    pool_names = dict(
        NodePool.objects.filter(resource_pool=resource_pool).values_list("pk", "name")
    )
    children: dict[int | None, list[Quota]] = {}
    for q in quotas:
        children.setdefault(q.parent_id, []).append(q)

    for q in quotas:
        seen = {q.pk}
        parent_id = q.parent_id
        while parent_id is not None:
            if parent_id in seen:
                raise DomainError(f"{called(q.name)} cannot be its own ancestor.", field="parent")
            if parent_id not in by_id:
                raise DomainError(
                    f"{called(q.name)}'s parent belongs to another resource pool.",
                    field="parent",
                )
            seen.add(parent_id)
            parent_id = by_id[parent_id].parent_id
        for pool_id in amounts[q.pk]:
            if pool_id not in pool_names:
                raise DomainError(
                    f"{called(q.name)} names a node pool outside resource pool "
                    f"{resource_pool.name}.",
                    field="resources",
                )

    lists = _allowed_lists(resource_pool)
    _check_allowed_pools(resource_pool, quotas, focus, lists, amounts, pool_names)
    ordered = [focus] + [q for q in quotas if q.pk != focus.pk]
    capacity = pool_capacity(resource_pool)
    for q in ordered:
        for pool_id, a in amounts[q.pk].items():
            for r in RESOURCES:
                limit = a.max(r)
                if limit is not None and limit < a.min(r):
                    raise AmountError(
                        f"{called(q.name)}: max {show(r, limit)} on {pool_names[pool_id]} "
                        f"is below its min {show(r, a.min(r))}.",
                        field=f"max_{r}",
                        node_pool=pool_names[pool_id],
                    )
        parents = [q.parent_id, q.pk]  # the group q belongs to, then the group it heads
        for parent_id in parents:
            _check_group(
                parent=by_id.get(parent_id) if parent_id is not None else None,
                members=children.get(parent_id, []),
                amounts=amounts,
                capacity=capacity,
                pool_names=pool_names,
                resource_pool=resource_pool,
                focus=q,
            )


def _check_group(
    *,
    parent: Quota | None,
    members: list[Quota],
    amounts: dict[int, dict[int, Amounts]],
    capacity: dict[int, dict[str, int]],
    pool_names: dict[int, str],
    resource_pool: ResourcePool,
    focus: Quota,
) -> None:
    """Siblings' min must fit in their parent's min (or, for roots, in the pool's capacity)."""
    if not members:
        return
    for pool_id, pool_name in pool_names.items():
        for r in RESOURCES:
            total = sum(amounts[m.pk].get(pool_id, Amounts()).min(r) for m in members)
            if parent is None:
                available = capacity.get(pool_id, {}).get(r, 0)
                owner = f"Resource pool {resource_pool.name}"
            else:
                available = amounts[parent.pk].get(pool_id, Amounts()).min(r)
                owner = called(parent.name)
            if total <= available:
                continue
            parts = " + ".join(
                f"{m.name} {show(r, amounts[m.pk].get(pool_id, Amounts()).min(r))}"
                for m in members
                if amounts[m.pk].get(pool_id, Amounts()).min(r)
            )
            field = f"min_{r}"
            if focus.pk == (parent.pk if parent else None):
                msg = (
                    f"{owner} would guarantee {show(r, available)} on {pool_name}, "
                    f"but its children already hold {show(r, total)} ({parts})."
                )
            else:
                others = total - amounts[focus.pk].get(pool_id, Amounts()).min(r)
                room = max(available - others, 0)
                msg = (
                    f"{owner} has {show(r, available)} on {pool_name} and its "
                    f"{'root quotas' if parent is None else 'children'} would need "
                    f"{show(r, total)} ({parts}). At most {show(r, room)} fit for {focus.name}."
                )
            raise AmountError(msg, field=field, node_pool=pool_name)


def _check_amounts(resources: Mapping[NodePool, Amounts]) -> None:
    """Amounts are 0 or more (the columns are unsigned: a negative one would fail in the DB)."""
    for node_pool, a in resources.items():
        for r in RESOURCES:
            for bound, value in (("min", a.min(r)), ("max", a.max(r))):
                if value is not None and value < 0:
                    raise AmountError(
                        f"{bound} {show(r, value)} on {node_pool.name} is below 0.",
                        field=f"{bound}_{r}",
                        node_pool=node_pool.name,
                    )


def _write_amounts(quota: Quota, resources: Mapping[NodePool, Amounts]) -> None:
    """Replace the quota's amounts for the given node pools."""
    for node_pool, a in resources.items():
        QuotaResource.objects.update_or_create(
            quota=quota,
            node_pool=node_pool,
            defaults={
                "min_gpu": a.min_gpu,
                "min_cpu": a.min_cpu,
                "min_memory": a.min_memory,
                "max_gpu": a.max_gpu,
                "max_cpu": a.max_cpu,
                "max_memory": a.max_memory,
            },
        )


def _check_name(name: str, exclude: Quota | None = None) -> str:
    """A quota name is required, a display name (console.names) and unique."""
    if not name.strip():
        raise DomainError("A quota needs a name.", field="name")
    check_display_name(name, what="quota name")
    others = Quota.objects.filter(name=name)
    if exclude is not None:
        others = others.exclude(pk=exclude.pk)
    if others.exists():
        raise NameTaken(f"A quota named {name} already exists.", field="name")
    return name


def _check_settings(over_quota_weight: float | None, queue_strategy: str) -> None:
    """Weight is positive when set; the queue strategy is known."""
    if over_quota_weight is not None and over_quota_weight <= 0:
        raise DomainError(
            f"Over-quota weight must be above 0, not {over_quota_weight}.",
            field="over_quota_weight",
        )
    if queue_strategy not in QueueStrategy.values:
        raise DomainError(
            f"Queue strategy {queue_strategy!r} is not one of {', '.join(QueueStrategy.values)}.",
            field="queue_strategy",
        )


@transaction.atomic
def quota_create(
    *,
    actor: Any,
    name: str,
    resource_pool: ResourcePool,
    resources: Mapping[NodePool, Amounts],
    parent: Quota | None = None,
    over_quota_weight: float | None = None,
    child_preemption: bool = False,
    lend_idle: bool = True,
    queue_strategy: str = QueueStrategy.PRIORITY,
    allowed_node_pools: Sequence[NodePool] = (),
) -> Quota:
    """Create a root quota (parent=None) or a child-level quota, checked and audited;
    allowed_node_pools restricts where its workloads run (empty: wherever its parent's may)."""
    pool = _lock_pool(resource_pool)
    name = _check_name(name)
    _check_settings(over_quota_weight, queue_strategy)
    _check_amounts(resources)
    if parent is not None and parent.resource_pool_id != pool.pk:
        raise DomainError(
            f"{called(parent.name)} belongs to resource pool {parent.resource_pool.name}, "
            f"not {pool.name}.",
            field="parent",
        )
    quota = Quota.objects.create(
        name=name,
        resource_pool=pool,
        parent=parent,
        over_quota_weight=over_quota_weight,
        child_preemption=child_preemption,
        lend_idle=lend_idle,
        queue_strategy=queue_strategy,
    )
    _write_amounts(quota, resources)
    quota.allowed_node_pools.set(allowed_node_pools)
    _check_tree(pool, quota)
    _audit(actor, quota, quota.name, AuditAction.CREATE, None, quota_state(quota))
    return quota


@transaction.atomic
def quota_update(
    *,
    actor: Any,
    quota: Quota,
    expected_version: int | None = None,
    name: str | None = None,
    over_quota_weight: float | None = None,
    clear_weight: bool = False,
    lend_idle: bool | None = None,
    queue_strategy: str | None = None,
    allowed_node_pools: Sequence[NodePool] | None = None,
    via: str = "",
) -> Quota:
    """Change a quota's name or settings (not its amounts: that is quota_scale).

    allowed_node_pools (empty: no restriction of its own) never widens the parent's, nor
    leaves a child one the quota no longer allows. Running workloads keep their nodes; queued
    ones wait for a pool the quota allows.
    """
    pool = _lock_pool(quota.resource_pool)
    quota = Quota.objects.select_for_update().get(pk=quota.pk)
    _check_version(quota, expected_version)
    before = quota_state(quota)
    if name is not None:
        quota.name = _check_name(name, exclude=quota)
    if over_quota_weight is not None or clear_weight:
        quota.over_quota_weight = over_quota_weight
    if lend_idle is not None:
        quota.lend_idle = lend_idle
    if queue_strategy is not None:
        quota.queue_strategy = queue_strategy
    _check_settings(quota.over_quota_weight, quota.queue_strategy)
    if allowed_node_pools is not None:
        quota.allowed_node_pools.set(allowed_node_pools)
        _check_tree(pool, quota)
    quota.version += 1
    quota.save()
    _audit(actor, quota, quota.name, AuditAction.UPDATE, before, quota_state(quota), via)
    return quota


@dataclass(frozen=True)
class ScaleOutcome:
    """What a scale did: the quota as stored now, and whether any amount changed."""

    quota: Quota
    changed: bool


def quota_scale(
    *,
    actor: Any,
    quota: Quota,
    resources: Mapping[NodePool, Amounts],
    expected_version: int | None = None,
) -> Quota:
    """Change a quota's min and max; usage over the new min becomes Not in Quota."""
    return quota_scale_outcome(
        actor=actor, quota=quota, resources=resources, expected_version=expected_version
    ).quota


@transaction.atomic
def quota_scale_outcome(
    *,
    actor: Any,
    quota: Quota,
    resources: Mapping[NodePool, Amounts],
    expected_version: int | None = None,
    via: str = "",
) -> ScaleOutcome:
    """quota_scale, saying whether it changed anything: a scale to the amounts the quota has
    writes nothing, bumps no version and records no audit."""
    pool = _lock_pool(quota.resource_pool)
    quota = Quota.objects.select_for_update().get(pk=quota.pk)
    _check_version(quota, expected_version)
    _check_amounts(resources)
    stored = _amounts_by_pool([quota.pk])[quota.pk]
    if all(stored.get(np.pk, Amounts()) == a for np, a in resources.items()):
        return ScaleOutcome(quota, changed=False)
    before = quota_state(quota)
    _write_amounts(quota, resources)
    _check_tree(pool, quota)
    quota.version += 1
    quota.save(update_fields=["version"])
    _audit(actor, quota, quota.name, AuditAction.SCALE, before, quota_state(quota), via)
    return ScaleOutcome(quota, changed=True)


@transaction.atomic
def quota_rebalance(
    *,
    actor: Any,
    source: Quota,
    target: Quota,
    node_pool: NodePool,
    gpu: int = 0,
    cpu: int = 0,
    memory: int = 0,
    via: str = "",
) -> tuple[Quota, Quota]:
    """Move guaranteed amounts from one quota to a sibling in one transaction."""
    pool = _lock_pool(source.resource_pool)
    source = Quota.objects.select_for_update().get(pk=source.pk)
    target = Quota.objects.select_for_update().get(pk=target.pk)
    if source.pk == target.pk:
        raise DomainError("Rebalance needs two different quotas.", field="target")
    if source.parent_id != target.parent_id or source.resource_pool_id != target.resource_pool_id:
        raise DomainError(
            f"{source.name} and {target.name} are not siblings: rebalance moves amounts "
            "between quotas of the same parent.",
            field="target",
        )
    moves = {"gpu": gpu, "cpu": cpu, "memory": memory}
    if any(v < 0 for v in moves.values()) or not any(moves.values()):
        raise DomainError("Give a positive amount to move.", field="gpu")
    amounts = _amounts_by_pool([source.pk, target.pk])
    src = amounts[source.pk].get(node_pool.pk, Amounts())
    dst = amounts[target.pk].get(node_pool.pk, Amounts())
    for r, v in moves.items():
        if v > src.min(r):
            raise AmountError(
                f"{source.name} guarantees {show(r, src.min(r))} on {node_pool.name}; "
                f"it cannot give {show(r, v)}.",
                field=r,
                node_pool=node_pool.name,
            )
        src = src.with_min(r, src.min(r) - v)
        dst = dst.with_min(r, dst.min(r) + v)
    before = {source.name: quota_state(source), target.name: quota_state(target)}
    _write_amounts(source, {node_pool: src})
    _write_amounts(target, {node_pool: dst})
    _check_tree(pool, source)
    _check_tree(pool, target)
    for q in (source, target):
        q.version += 1
        q.save(update_fields=["version"])
    after = {source.name: quota_state(source), target.name: quota_state(target)}
    for q in (source, target):
        _audit(actor, q, q.name, AuditAction.REBALANCE, before, after, via)
    return source, target


@transaction.atomic
def quota_set_child_preemption(
    *, actor: Any, quota: Quota, enabled: bool, expected_version: int | None = None
) -> Quota:
    """Turn child-level preemption on or off."""
    _lock_pool(quota.resource_pool)
    quota = Quota.objects.select_for_update().get(pk=quota.pk)
    _check_version(quota, expected_version)
    before = quota_state(quota)
    quota.child_preemption = enabled
    quota.version += 1
    quota.save(update_fields=["child_preemption", "version"])
    _audit(actor, quota, quota.name, AuditAction.TOGGLE, before, quota_state(quota))
    return quota


@transaction.atomic
def quota_delete(*, actor: Any, quota: Quota) -> None:
    """Delete a quota that has no children and no bound workspaces."""
    _lock_pool(quota.resource_pool)
    quota = Quota.objects.select_for_update().get(pk=quota.pk)
    children = list(quota.children.values_list("name", flat=True))
    if children:
        raise DomainError(
            f"{called(quota.name)} has child quotas ({', '.join(children)}); delete them first.",
            field="quota",
        )
    bound = list(quota.workspaces.values_list("name", flat=True))
    if bound:
        raise DomainError(
            f"{called(quota.name)} is bound to workspaces ({', '.join(bound)}); unbind it first.",
            field="quota",
        )
    rules = sorted(
        CalendarRule.objects.filter(Q(quota=quota) | Q(target=quota)).values_list("name", flat=True)
    )
    if rules:
        raise DomainError(
            f"{called(quota.name)} is named by calendar rules ({', '.join(rules)}); delete "
            "them first.",
            field="quota",
        )
    before = quota_state(quota)
    _audit(actor, None, quota.name, AuditAction.DELETE, before, None)
    quota.delete()
