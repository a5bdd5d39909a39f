"""Cluster nodes into node rows: each joins the node pool its label names, with its allocatable."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Sum
from kubernetes.utils.quantity import parse_quantity

from cluster.locking import write_lock
from cluster.models import Node, NodePool, ResourcePool
from cluster.services import node_create, node_schedulable_set
from jobs.backends.kubernetes.config import KubeConfig
from jobs.choices import LIVE_POD_STATUSES
from quotas.amounts import RESOURCES, show
from quotas.models import QuotaResource
from quotas.services.quotas import pool_capacity


@dataclass(frozen=True)
class ClusterNode:
    """A node as the API reports it: GPUs (devices), millicores and MiB allocatable."""

    name: str
    pool: str | None
    gpus: int
    cpu: int
    memory: int
    ready: bool
    schedulable: bool
    labels: dict[str, str]


def cluster_node(obj: dict[str, Any], kube: KubeConfig) -> ClusterNode:
    """Read one API node: its pool label, allocatable resources, readiness and cordon."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    labels = meta.get("labels") or {}
    allocatable = status.get("allocatable") or {}

    def amount(resource: str) -> Any:
        return parse_quantity(allocatable.get(resource, "0"))  # type: ignore[no-untyped-call]

    gpus = int(amount(kube.gpu_resource))
    if kube.shared_gpu_resource:
        gpus += int(amount(kube.shared_gpu_resource)) // kube.gpu_slices
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return ClusterNode(
        name=meta["name"],
        pool=labels.get(kube.node_pool_label),
        gpus=gpus,
        cpu=int(amount("cpu") * 1000),
        memory=int(amount("memory") / 2**20),
        ready=ready,
        schedulable=ready and not spec.get("unschedulable", False),
        labels=dict(labels),
    )


@dataclass
class NodeSyncResult:
    """What a node sync changed, and what it refused or warns about."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    cordoned: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)


def _held() -> dict[int, dict[str, int]]:
    """What live replicas hold on each node: node id → GPUs (devices), millicores, MiB."""
    rows = (
        Node.objects.filter(pods__status__in=LIVE_POD_STATUSES)
        .values("pk")
        .annotate(
            gpu=Sum("pods__workload__gpu"),
            cpu=Sum("pods__workload__cpu"),
            memory=Sum("pods__workload__memory"),
        )
    )
    return {
        r["pk"]: {
            "gpus": math.ceil((r["gpu"] or 0) / 1000),
            "cpu": r["cpu"] or 0,
            "memory": r["memory"] or 0,
        }
        for r in rows
    }


def _update(row: Node, seen: ClusterNode, pool: NodePool, held: dict[str, int]) -> list[str]:
    """Apply a known node's new facts; returns why some were held back."""
    notes = []
    if row.node_pool_id != pool.pk:
        if held:
            notes.append(
                f"Node {row.name} is now labelled for node pool {pool.name}, but stays in "
                f"{row.node_pool.name} while replicas run on it."
            )
        else:
            row.node_pool = pool
    for name in ("gpus", "cpu", "memory"):
        value = getattr(seen, name)
        # Never below what running replicas hold, so no node is over-allocated: a drop
        # (a device plugin restarting, a GPU falling off the bus) shows once they end.
        floor = held.get(name, 0)
        if value < floor:
            notes.append(
                f"Node {row.name} reports {value} {name} allocatable, but its replicas hold "
                f"{floor}; kept {floor} until they end."
            )
        setattr(row, name, max(value, floor))
    row.labels = seen.labels
    return notes


def _shortfalls() -> list[str]:
    """Node pools whose schedulable capacity is below what their root quotas guarantee."""
    guaranteed = (
        QuotaResource.objects.filter(quota__parent__isnull=True)
        .values_list("quota__resource_pool_id", "node_pool_id", "node_pool__name")
        .annotate(gpu=Sum("min_gpu"), cpu=Sum("min_cpu"), memory=Sum("min_memory"))
    )
    capacity = {rp.pk: pool_capacity(rp) for rp in ResourcePool.objects.all()}
    messages = []
    for resource_pool_id, node_pool_id, name, *sums in guaranteed:
        have = capacity[resource_pool_id].get(node_pool_id, {})
        for r, total in zip(RESOURCES, sums, strict=True):
            if (total or 0) > have.get(r, 0):
                messages.append(
                    f"Node pool {name} now has {show(r, have.get(r, 0))} schedulable, below "
                    f"the {show(r, total)} its root quotas guarantee."
                )
    return messages


@transaction.atomic
def nodes_sync(*, nodes: list[ClusterNode], kube: KubeConfig) -> NodeSyncResult:
    """Bring node rows in line with the cluster; quotas are never changed.

    New nodes join the node pool their label names; nodes that are gone, not ready or cordoned
    become unschedulable; capacity follows allocatable but never drops below what running
    replicas hold. Pools left with less than their root quotas guarantee are reported.
    """
    write_lock()
    result = NodeSyncResult()
    pools = {p.name: p for p in NodePool.objects.all()}
    rows = {n.name: n for n in Node.objects.select_related("node_pool")}
    held = _held()
    seen: set[str] = set()
    for node in nodes:
        if node.pool is None:
            continue  # not a Tidepool node (no pool label): control plane, CPU-only, ...
        pool = pools.get(node.pool)
        if pool is None:
            result.messages.append(
                f"Node {node.name}: node pool {node.pool!r} (label {kube.node_pool_label}) does "
                "not exist; create it to use this node."
            )
            continue
        seen.add(node.name)
        row = rows.get(node.name)
        if row is None:
            node_create(
                node_pool=pool,
                name=node.name,
                gpus=node.gpus,
                cpu=node.cpu,
                memory=node.memory,
                labels=node.labels,
                schedulable=node.schedulable,
            )
            result.created.append(node.name)
            continue
        before = (row.node_pool_id, row.gpus, row.cpu, row.memory, row.labels)
        result.messages += _update(row, node, pool, held.get(row.pk, {}))
        if (row.node_pool_id, row.gpus, row.cpu, row.memory, row.labels) != before:
            row.save(update_fields=["node_pool", "gpus", "cpu", "memory", "labels"])
            result.updated.append(row.name)
        if row.schedulable != node.schedulable:
            node_schedulable_set(node=row, schedulable=node.schedulable)
            (result.updated if node.schedulable else result.cordoned).append(row.name)
    if rows and not seen:
        # More likely a wrong label setting or missing permission than a cluster with no nodes.
        result.messages.append(
            f"The cluster has no node labelled {kube.node_pool_label} with a known node pool; "
            f"the {len(rows)} node(s) on record were left as they are "
            "(check TIDEPOOL_K8S_NODE_POOL_LABEL)."
        )
        return result
    for name, row in rows.items():
        if name not in seen and row.schedulable:
            node_schedulable_set(node=row, schedulable=False)
            result.cordoned.append(name)
            result.messages.append(f"Node {name} is gone from the cluster; it takes no new work.")
    result.messages += _shortfalls()
    return result
