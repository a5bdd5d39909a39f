"""Reads of the cluster: node pools with their totals, and the schedulable capacity."""

from __future__ import annotations

from django.db.models import Count, QuerySet, Sum

from cluster.models import Node, NodePool

MILLI = 1000


def node_pools_with_counts() -> QuerySet[NodePool]:
    """Node pools with node and GPU counts, in one query."""
    return (
        NodePool.objects.select_related("resource_pool")
        .annotate(node_count=Count("nodes"), gpu_count=Sum("nodes__gpus"))
        .order_by("name")
    )


def schedulable_capacity() -> int:
    """milli-GPUs on schedulable nodes (1 query)."""
    capacity = Node.objects.filter(schedulable=True).aggregate(gpus=Sum("gpus"))["gpus"]
    return (capacity or 0) * MILLI
