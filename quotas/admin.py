"""Django admin for the quota tree: browse only; the services make changes."""

from __future__ import annotations

from django.contrib import admin

from console.admin import ReadOnlyAdmin, ReadOnlyInline
from quotas.models import CalendarRule, Quota, QuotaAudit, QuotaResource


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

    list_display = ("at", "quota_name", "action", "actor", "via")
    list_filter = ("action",)
    list_select_related = ("actor",)
    search_fields = ("quota_name", "actor__username")


@admin.register(CalendarRule)
class CalendarRuleAdmin(ReadOnlyAdmin):
    """Quota calendar rules: scheduled rebalance, scale or lend-idle (edit them in the console)."""

    list_display = (
        "name",
        "action",
        "quota",
        "target",
        "gpus",
        "cron",
        "timezone",
        "enabled",
        "last_run_at",
        "last_outcome",
    )
    list_filter = ("enabled", "action", "last_outcome")
    list_select_related = ("quota", "target")
    search_fields = ("name", "quota__name")
