"""Django admin for the quota tree: browse only; the services make changes."""

from __future__ import annotations

from django.contrib import admin

from console.admin import ReadOnlyAdmin, ReadOnlyInline
from quotas.models import Quota, QuotaAudit, QuotaResource


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
