"""Django admin for the cluster and the quota tree: browse only; the services make changes."""

from __future__ import annotations

from django.contrib import admin

from console.admin import ReadOnlyAdmin, ReadOnlyInline
from quotas.models import Node, NodePool, Quota, QuotaAudit, QuotaResource, ResourcePool


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


class QuotaResourceInline(ReadOnlyInline):
    """A quota's min and max per node pool."""

    model = QuotaResource
    fields = ("node_pool", "min_gpu", "min_cpu", "min_memory", "max_gpu", "max_cpu", "max_memory")


@admin.register(Quota)
class QuotaAdmin(ReadOnlyAdmin):
    """The quota tree."""

    list_display = (
        "name",
        "parent",
        "resource_pool",
        "child_preemption",
        "lend_idle",
        "queue_strategy",
        "version",
    )
    list_filter = ("resource_pool", "child_preemption", "lend_idle", "queue_strategy")
    list_select_related = ("parent", "resource_pool")
    search_fields = ("name",)
    inlines = (QuotaResourceInline,)


@admin.register(QuotaAudit)
class QuotaAuditAdmin(ReadOnlyAdmin):
    """The quota audit log: who changed what, before and after."""

    list_display = ("at", "quota_name", "action", "actor")
    list_filter = ("action",)
    list_select_related = ("actor",)
    search_fields = ("quota_name", "actor__username")
