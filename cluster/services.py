"""Resource pools, node pools and nodes: create them, or import nodes from a cluster spec."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q

from cluster import node_import
from cluster.choices import GpuSharing, IdleScope
from cluster.locking import write_lock
from cluster.models import Node, NodePool, ResourcePool
from console.errors import DomainError, NameTaken

# Keep each `name IN (...)` under SQLite's older 999-parameter limit.
_CHUNK = 500


@transaction.atomic
def resource_pool_create(
    *, name: str, idle_scope: str = IdleScope.TREE, description: str = ""
) -> ResourcePool:
    """Create a resource pool that root quotas take capacity from."""
    name = name.strip()
    if not name:
        raise DomainError("A resource pool needs a name.", field="name")
    if idle_scope not in IdleScope.values:
        raise DomainError(
            f"Idle scope {idle_scope!r} is not one of {', '.join(IdleScope.values)}.",
            field="idle_scope",
        )
    if ResourcePool.objects.filter(name=name).exists():
        raise NameTaken(f"A resource pool named {name} already exists.", field="name")
    return ResourcePool.objects.create(name=name, idle_scope=idle_scope, description=description)


@transaction.atomic
def node_pool_create(
    *,
    resource_pool: ResourcePool,
    name: str,
    gpu_model: str,
    label_selector: dict[str, str] | None = None,
) -> NodePool:
    """Create a node pool of one GPU model; nodes join it by label."""
    name = name.strip()
    if not name:
        raise DomainError("A node pool needs a name.", field="name")
    if NodePool.objects.filter(name=name).exists():
        raise NameTaken(f"A node pool named {name} already exists.", field="name")
    return NodePool.objects.create(
        resource_pool=resource_pool,
        name=name,
        gpu_model=gpu_model or name,
        label_selector=label_selector or {"tidepool.io/gpu-model": gpu_model or name},
    )


@transaction.atomic
def node_create(
    *,
    node_pool: NodePool,
    name: str,
    gpus: int,
    cpu: int,
    memory: int,
    labels: dict[str, Any] | None = None,
    schedulable: bool = True,
    gpu_sharing: str = GpuSharing.ANY,
    gpu_replicas: int = 1,
    mig_profile: str = "",
) -> Node:
    """Add one node to a node pool (GPU sharing as its device plugin exposes it)."""
    write_lock()
    if Node.objects.filter(name=name).exists():
        raise NameTaken(f"A node named {name} already exists.", field="name")
    for field, value in (("gpus", gpus), ("cpu", cpu), ("memory", memory)):
        if value < 0:
            raise DomainError(f"{field} must be 0 or more, not {value}.", field=field)
    return Node.objects.create(
        node_pool=node_pool,
        name=name,
        gpus=gpus,
        cpu=cpu,
        memory=memory,
        labels=labels or dict(node_pool.label_selector),
        schedulable=schedulable,
        gpu_sharing=gpu_sharing,
        gpu_replicas=gpu_replicas,
        mig_profile=mig_profile,
    )


@transaction.atomic
def node_schedulable_set(*, node: Node, schedulable: bool) -> Node:
    """Cordon (False) or uncordon (True) a node; running work stays, new work skips it."""
    write_lock()
    node.schedulable = schedulable
    node.save(update_fields=["schedulable"])
    return node


@transaction.atomic
def node_cooldown_set(*, node: Node, until: datetime) -> Node:
    """The node refused a pod: it takes no new pods until `until` (never shortened)."""
    write_lock()
    Node.objects.filter(pk=node.pk).filter(
        Q(cooldown_until__isnull=True) | Q(cooldown_until__lt=until)
    ).update(cooldown_until=until)
    node.refresh_from_db(fields=["cooldown_until"])
    return node


@dataclass(frozen=True)
class ImportResult:
    """What one import added: nodes, GPUs, and the node pools it created or filled."""

    nodes: int
    gpus: int
    pools_created: list[str]
    pools: dict[str, int]


@transaction.atomic
def nodes_import(
    *, resource_pool: ResourcePool, text: str, fmt: str = "auto", filename: str = ""
) -> ImportResult:
    """Import every node of a CSV or YAML cluster spec, or none (refusals name the line)."""
    spec = node_import.parse(text, fmt, filename=filename)
    write_lock()

    names = [n.name for n in spec.nodes]
    existing: set[str] = set()
    for start in range(0, len(names), _CHUNK):
        existing.update(
            Node.objects.filter(name__in=names[start : start + _CHUNK]).values_list(
                "name", flat=True
            )
        )
    for node in spec.nodes:
        if node.name in existing:
            raise node_import.refuse(node.line, f"node {node.name!r} already exists")

    pools = {p.name: p for p in NodePool.objects.filter(name__in=list(spec.pools))}
    created: list[str] = []
    for pool_spec in spec.pools.values():
        pool = pools.get(pool_spec.name)
        if pool is None:
            labels = pool_spec.labels or {"tidepool.io/gpu-model": pool_spec.gpu_model}
            pools[pool_spec.name] = node_pool_create(
                resource_pool=resource_pool,
                name=pool_spec.name,
                gpu_model=pool_spec.gpu_model,
                label_selector=labels,
            )
            created.append(pool_spec.name)
        elif pool.resource_pool_id != resource_pool.pk:
            raise node_import.refuse(
                pool_spec.line,
                f"node pool {pool.name!r} belongs to resource pool {pool.resource_pool.name!r}, "
                f"not {resource_pool.name!r}",
            )

    rows = [
        Node(
            node_pool=pools[n.pool],
            name=n.name,
            gpus=n.gpus,
            cpu=n.cpu,
            memory=n.memory,
            labels={**pools[n.pool].label_selector, **n.labels},
            schedulable=n.schedulable,
        )
        for n in spec.nodes
    ]
    Node.objects.bulk_create(rows, batch_size=_CHUNK)
    per_pool: dict[str, int] = {}
    for n in spec.nodes:
        per_pool[n.pool] = per_pool.get(n.pool, 0) + 1
    return ImportResult(
        nodes=len(rows),
        gpus=sum(n.gpus for n in spec.nodes),
        pools_created=created,
        pools=per_pool,
    )
