"""The cluster: resource pools, node pools, nodes, and the one write lock of the scheduling state.

The tables keep the names they had when these models lived in quotas (and jobs, for the lock):
the move to this app changed Django's state only (cluster/migrations/0001_initial.py).
"""

from __future__ import annotations

from django.db import models

from cluster.choices import GpuSharing, IdleScope


class ResourcePool(models.Model):
    """A slice of the cluster that root quotas take their guaranteed capacity from."""

    name = models.CharField(max_length=100, unique=True)
    idle_scope = models.CharField(max_length=8, choices=IdleScope.choices, default=IdleScope.TREE)
    description = models.TextField(blank=True)

    class Meta:
        db_table = "quotas_resourcepool"  # kept from when the model lived in quotas
        ordering = ["name"]
        permissions = [("manage_cluster", "Manage resource pools, node pools, nodes and quotas")]

    def __str__(self) -> str:
        return self.name


class NodePool(models.Model):
    """Nodes of one GPU model; capacity and quotas are kept per node pool."""

    resource_pool = models.ForeignKey(
        ResourcePool, on_delete=models.PROTECT, related_name="node_pools"
    )
    name = models.CharField(max_length=100, unique=True)
    gpu_model = models.CharField(max_length=100)
    label_selector = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "quotas_nodepool"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A GPU node; gpus is a device count, cpu in millicores, memory in MiB."""

    node_pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="nodes")
    name = models.CharField(max_length=253, unique=True)
    gpus = models.PositiveIntegerField()
    cpu = models.PositiveBigIntegerField(help_text="millicores")
    memory = models.PositiveBigIntegerField(help_text="MiB")
    labels = models.JSONField(default=dict, blank=True)
    schedulable = models.BooleanField(default=True)
    # How the device plugin hands out this node's GPUs (cluster.choices.GpuSharing); `gpus`
    # counts physical GPUs (or MIG slices of `mig_profile`), never time-slice replicas.
    gpu_sharing = models.CharField(
        max_length=16, choices=GpuSharing.choices, default=GpuSharing.ANY
    )
    gpu_replicas = models.PositiveIntegerField(
        default=1, help_text="time-slice or MPS replicas the device plugin offers per GPU"
    )
    mig_profile = models.CharField(max_length=40, blank=True, help_text="e.g. 1g.10gb")
    # The kubelet refused a pod here: no new pods until then (jobs.services.sync).
    cooldown_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "quotas_node"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class WriteLock(models.Model):
    """The scheduling state's one write lock (its single row) and how often it was taken."""

    version = models.PositiveBigIntegerField(default=0)

    class Meta:
        db_table = "jobs_writelock"
