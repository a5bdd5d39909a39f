"""Django admin for the cluster: browse only; the services make changes."""

from __future__ import annotations

from django.contrib import admin

from cluster.models import Node, NodePool, ResourcePool
from console.admin import ReadOnlyAdmin


@admin.register(ResourcePool)
class ResourcePoolAdmin(ReadOnlyAdmin):
    """Resource pools."""

    list_display = ("name", "idle_scope", "description")
    list_filter = ("idle_scope",)
    search_fields = ("name",)


@admin.register(NodePool)
class NodePoolAdmin(ReadOnlyAdmin):
    """Node pools (GPU models)."""

    list_display = ("name", "gpu_model", "resource_pool")
    list_filter = ("resource_pool", "gpu_model")
    list_select_related = ("resource_pool",)
    search_fields = ("name", "gpu_model")


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    """Nodes; cordon them from the node pool page, which the scheduler then honours."""

    list_display = ("name", "node_pool", "gpus", "cpu", "memory", "schedulable")
    list_filter = ("schedulable", "node_pool")
    list_select_related = ("node_pool",)
    search_fields = ("name",)
