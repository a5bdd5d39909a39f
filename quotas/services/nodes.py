"""Resource pools, node pools and nodes: create them, or import nodes from a cluster spec."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from console.errors import DomainError
from quotas.choices import IdleScope
from quotas.models import Node, NodePool, ResourcePool


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
        raise DomainError(f"A resource pool named {name} already exists.", field="name")
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
        raise DomainError(f"A node pool named {name} already exists.", field="name")
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
) -> Node:
    """Add one node to a node pool."""
    if Node.objects.filter(name=name).exists():
        raise DomainError(f"A node named {name} already exists.", field="name")
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
    )
