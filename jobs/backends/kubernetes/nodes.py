"""Cluster nodes into node rows: each joins the node pool its label names, with its allocatable."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Sum
from kubernetes.utils.quantity import parse_quantity

from cluster.choices import GpuSharing
from cluster.locking import write_lock
from cluster.models import Node, NodePool, ResourcePool
from cluster.services import node_create, node_schedulable_set
from jobs.backends.kubernetes.config import KubeConfig
from jobs.backends.kubernetes.foreign import Held
from jobs.backends.kubernetes.gpus import gpus_held, node_gpus
from jobs.choices import LIVE_POD_STATUSES
from quotas.amounts import RESOURCES, show
from quotas.models import QuotaResource
from quotas.services.quotas import pool_capacity

# Node conditions under which the kubelet evicts and admits less: no new pods go there.
PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure")
# Taints Tidepool's pods tolerate (manifest.TOLERATIONS): the GPU taint cloud providers put on
# GPU nodes to keep other pods off (GKE, AKS). Any other NoSchedule or NoExecute taint keeps
# Tidepool's new pods off the node; a NoExecute one also evicts its running pods, which the
# backend then sees as a node loss.
TOLERATED = frozenset({("nvidia.com/gpu", "NoSchedule")})


@dataclass(frozen=True)
class ClusterNode:
    """A node as the API reports it: what Tidepool can use of it (GPUs or MIG slices, not
    time-slice replicas; millicores and MiB), less what pods it does not own hold."""

    name: str
    pool: str | None
    gpus: int
    cpu: int
    memory: int
    ready: bool
    schedulable: bool
    labels: dict[str, str]
    gpu_sharing: str = GpuSharing.ANY
    gpu_replicas: int = 1
    mig_profile: str = ""
    # why it takes no new pods ("is cordoned", "has MemoryPressure"); "" when it does
    ineligible: str = ""
    note: str = ""


def ineligibility(obj: dict[str, Any]) -> str:
    """Why a node takes no new pods, or "" when it does: not ready, cordoned, under pressure,
    or tainted NoSchedule/NoExecute with a taint Tidepool's pods do not tolerate."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if conditions.get("Ready") != "True":
        return "is not ready"
    if spec.get("unschedulable"):
        return "is cordoned"
    pressed = [name for name in PRESSURE if conditions.get(name) == "True"]
    if pressed:
        return f"has {' and '.join(pressed)}"
    for taint in spec.get("taints") or []:
        effect = taint.get("effect")
        if effect in ("NoSchedule", "NoExecute") and (taint.get("key"), effect) not in TOLERATED:
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"is tainted {taint.get('key')}{value}:{effect}"
    return ""


def cluster_node(obj: dict[str, Any], kube: KubeConfig, held: Held | None = None) -> ClusterNode:
    """Read one API node: its pool label, allocatable resources less what other pods hold
    (`held`), its GPUs as the device plugin exposes them, and whether it takes new pods."""
    meta, status = obj["metadata"], obj.get("status") or {}
    labels = meta.get("labels") or {}
    allocatable = status.get("allocatable") or {}
    held = held or {}

    def amount(resource: str) -> Any:
        return parse_quantity(allocatable.get(resource, "0"))  # type: ignore[no-untyped-call]

    def taken(resource: str) -> Any:
        return held.get(resource, 0)

    gpus = node_gpus(labels, int(amount(kube.gpu_resource)))
    count = gpus.count - gpus_held(int(taken(kube.gpu_resource)), gpus)
    sharing = gpus.sharing
    if kube.shared_gpu_resource and amount(kube.shared_gpu_resource):
        free = int(amount(kube.shared_gpu_resource) - taken(kube.shared_gpu_resource))
        count += free // kube.gpu_slices
        sharing = GpuSharing.ANY  # whole GPUs, and slices through the renamed resource
    pool = labels.get(kube.node_pool_label)
    if pool is not None and gpus.mig_profile:
        pool = f"{pool}-MIG-{gpus.mig_profile}"
    why = ineligibility(obj)
    return ClusterNode(
        name=meta["name"],
        pool=pool,
        gpus=max(count, 0),
        cpu=max(int((amount("cpu") - taken("cpu")) * 1000), 0),
        memory=max(int((amount("memory") - taken("memory")) / 2**20), 0),
        ready=why != "is not ready",
        schedulable=not why,
        labels=dict(labels),
        gpu_sharing=sharing,
        gpu_replicas=gpus.replicas,
        mig_profile=gpus.mig_profile,
        ineligible=why,
        note=gpus.note,
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


# The node row's fields a sync keeps in line with the cluster (schedulable has its service).
SYNCED = [
    *("node_pool", "gpus", "cpu", "memory", "labels"),
    *("gpu_sharing", "gpu_replicas", "mig_profile"),
]


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
    row.gpu_sharing, row.gpu_replicas = seen.gpu_sharing, seen.gpu_replicas
    row.mig_profile = seen.mig_profile
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
        if node.note:
            result.messages.append(f"Node {node.name}: {node.note}.")
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
                gpu_sharing=node.gpu_sharing,
                gpu_replicas=node.gpu_replicas,
                mig_profile=node.mig_profile,
            )
            if not node.schedulable:
                result.messages.append(f"Node {node.name} {node.ineligible}; it takes no new pods.")
            result.created.append(node.name)
            continue
        before = [getattr(row, f) for f in SYNCED]
        result.messages += _update(row, node, pool, held.get(row.pk, {}))
        if [getattr(row, f) for f in SYNCED] != before:
            row.save(update_fields=SYNCED)
            result.updated.append(row.name)
        if row.schedulable != node.schedulable:
            node_schedulable_set(node=row, schedulable=node.schedulable)
            (result.updated if node.schedulable else result.cordoned).append(row.name)
            if not node.schedulable:
                result.messages.append(f"Node {row.name} {node.ineligible}; it takes no new pods.")
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
