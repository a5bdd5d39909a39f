"""Django admin for workloads and what the control loop records: browse only.

Scaling rules' beat tasks are django-celery-beat's own admin pages.
"""

from __future__ import annotations

from django.contrib import admin

from console.admin import ReadOnlyAdmin
from jobs.models import ControlState, Pod, ScalingRule, UsageSample, Workload, WorkloadEvent


@admin.register(Workload)
class WorkloadAdmin(ReadOnlyAdmin):
    """Training jobs, inference services and interactive instances."""

    list_display = (
        "name",
        "kind",
        "status",
        "in_quota",
        "workspace",
        "quota",
        "owner",
        "replicas",
        "gpu",
        "priority",
        "submitted_at",
    )
    list_filter = ("kind", "status", "in_quota", "workspace", "quota")
    list_select_related = ("workspace", "quota", "owner")
    search_fields = ("name", "owner__username")


@admin.register(Pod)
class PodAdmin(ReadOnlyAdmin):
    """Replicas on nodes."""

    list_display = ("name", "workload", "index", "attempt", "node", "status", "borrowed")
    list_filter = ("status", "borrowed")
    list_select_related = ("workload", "node")
    search_fields = ("workload__name", "node__name")


@admin.register(WorkloadEvent)
class WorkloadEventAdmin(ReadOnlyAdmin):
    """Workload timelines."""

    list_display = ("at", "workload", "kind", "message")
    list_filter = ("kind",)
    list_select_related = ("workload",)
    search_fields = ("workload__name", "message")


@admin.register(ScalingRule)
class ScalingRuleAdmin(ReadOnlyAdmin):
    """Scheduled scaling rules of inference services."""

    list_display = (
        "name",
        "service",
        "cron",
        "timezone",
        "target_replicas",
        "exclude_cron",
        "enabled",
        "last_fired_at",
    )
    list_filter = ("enabled", "timezone")
    list_select_related = ("service",)
    search_fields = ("name", "service__name")


@admin.register(UsageSample)
class UsageSampleAdmin(ReadOnlyAdmin):
    """Per-minute quota usage (milli-GPU), as the dashboards plot it."""

    list_display = ("at", "quota", "gpu_in_quota", "gpu_borrowed", "gpu_pending", "preemptions")
    list_filter = ("quota",)
    list_select_related = ("quota",)


@admin.register(ControlState)
class ControlStateAdmin(ReadOnlyAdmin):
    """The control loop's clock and cycle count."""

    list_display = ("sim_now", "cycles", "last_cycle_at", "last_sample_at")
