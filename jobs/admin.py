"""Django admin for workloads and what the control loop records: browse only.

Scaling rules' and quota calendar rules' beat tasks stay on django-celery-beat's own admin
pages, read-only there (ManagedPeriodicTaskAdmin says why); every other periodic task is
edited as before.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django_celery_beat.admin import (
    CrontabScheduleAdmin,
    PeriodicTaskAdmin,
    PeriodicTaskForm,
)
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from console.admin import ReadOnlyAdmin
from console.cron import describe
from jobs.models import ControlState, Pod, ScalingRule, UsageSample, Workload, WorkloadEvent
from jobs.services.scaling import FIRE_TASK
from quotas.models import CalendarRule
from quotas.services.calendar import FIRE_TASK as CALENDAR_FIRE_TASK

# The tasks the console writes from its rules: scaling rules and quota calendar rules.
MANAGED_TASKS = (FIRE_TASK, CALENDAR_FIRE_TASK)


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


# Scaling rules' beat tasks --------------------------------------------------------------------


def _managed(task: PeriodicTask | None) -> bool:
    """Whether a periodic task mirrors a scaling or calendar rule."""
    return task is not None and task.task in MANAGED_TASKS


def _calendar_rule(task: PeriodicTask) -> str | None:
    """For a calendar rule's task, where to change it, in words (None for other tasks)."""
    if task.task != CALENDAR_FIRE_TASK:
        return None
    rule = CalendarRule.objects.filter(periodic_task=task).first()
    if rule is None:
        return "Tidepool (no rule: the console removes it)"
    return format_html(
        'Managed by Tidepool: <a href="{}">quota calendar rule {}</a> ({}, {}; {}). Edit '
        "the rule in the console; this task mirrors it and cannot be changed here.",
        reverse("quotas:calendar_rule", args=[rule.pk]),
        rule.name,
        describe(rule.cron),
        rule.timezone,
        "enabled" if rule.enabled else "disabled",
    )


def _rule_url(rule: ScalingRule) -> str:
    """The console page that edits the rule."""
    service = rule.service
    return reverse("jobs:rule_update", args=[service.workspace.name, service.pk, rule.pk])


class _PeriodicTaskForm(PeriodicTaskForm):  # type: ignore[misc]
    """The stock form, refusing a hand-made scaling-rule task (it would fire no rule)."""

    def clean(self) -> dict[str, Any]:
        """Scaling-rule tasks come from the console only."""
        data: dict[str, Any] = super().clean()
        if data.get("task") in MANAGED_TASKS:
            raise forms.ValidationError(
                "Rule tasks are made by the console: add a scaling rule on the service's page, "
                "or a quota calendar rule on the quota's Calendar page."
            )
        return data


class ManagedPeriodicTaskAdmin(PeriodicTaskAdmin):  # type: ignore[misc]
    """django-celery-beat's periodic tasks, with the scaling rules' mirrors read-only.

    One source of truth: the ScalingRule row. It holds what a PeriodicTask cannot (the target,
    the exception cron, cron's day-of-month OR day-of-week rule, which Celery's crontab reads
    as AND), and it alone decides whether a firing runs: the embedded runner never reads
    PeriodicTask, and in the distributed mode beat's crontab tick and the 30-second
    scaling_rules_due sweep both end in scaling_rule_fire(), which checks the rule. An enable,
    disable or crontab edit made here would therefore be ignored, or undone by the next save
    of the rule, so the admin refuses it: each mirrored task shows read-only with a link to
    its rule in the console, the bulk actions leave it alone, and the crontab schedules it
    uses are read-only too (ManagedCrontabScheduleAdmin). The console rewrites the task on
    every change of the rule, so what the admin shows is always the rule's state.
    """

    form = _PeriodicTaskForm
    list_display = ("name", "managed_by", *PeriodicTaskAdmin.list_display[1:])

    @admin.display(description="Managed by")
    def managed_by(self, obj: PeriodicTask) -> str:
        """A link to the console's rule, for a scaling rule's task."""
        if not _managed(obj):
            return ""
        calendar = _calendar_rule(obj)
        if calendar is not None:
            return calendar
        rule = (
            ScalingRule.objects.filter(periodic_task=obj)
            .select_related("service__workspace")
            .first()
        )
        if rule is None:
            return "Tidepool (no rule: the console removes it)"
        return format_html(
            '<a href="{}">Scaling rule {} of {}</a>', _rule_url(rule), rule.name, rule.service.name
        )

    @admin.display(description="Scaling rule")
    def console_rule(self, obj: PeriodicTask) -> str:
        """Where to change this task: the rule, in words."""
        calendar = _calendar_rule(obj)
        if calendar is not None:
            return calendar
        rule = (
            ScalingRule.objects.filter(periodic_task=obj)
            .select_related("service__workspace")
            .first()
        )
        if rule is None:
            return "This task's rule is gone; the console no longer uses it."
        last = (
            f"last run {rule.last_run_at:%Y-%m-%d %H:%M} UTC: {rule.last_run_result}"
            if rule.last_run_at
            else "not run yet"
        )
        return format_html(
            'Managed by Tidepool: <a href="{}">edit rule {} of {}</a> in the console '
            "({}, {}; {}; {}). This task mirrors it and cannot be changed here; its own "
            "Last run field is beat's alone, so the rule's last run is the one to read.",
            _rule_url(rule),
            rule.name,
            rule.service.name,
            describe(rule.cron),
            rule.timezone,
            "enabled" if rule.enabled else "disabled",
            last,
        )

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        """A managed task leads with the link to its rule."""
        fieldsets = super().get_fieldsets(request, obj)
        if _managed(obj):
            return (("Scaling rule", {"fields": ("console_rule",)}), *fieldsets)
        return fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """The link is computed, never edited."""
        return (*super().get_readonly_fields(request, obj), "console_rule")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Not for a scaling rule's task: change the rule in the console."""
        return not _managed(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Not for a scaling rule's task: delete the rule in the console."""
        return not _managed(obj) and super().has_delete_permission(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        """The bulk delete, without the rules' tasks."""
        super().delete_queryset(request, self._unmanaged(request, queryset))

    def _unmanaged(
        self, request: HttpRequest, queryset: QuerySet[PeriodicTask]
    ) -> QuerySet[PeriodicTask]:
        """The selection minus scaling rules' tasks, saying so when any were selected."""
        skipped = queryset.filter(task__in=MANAGED_TASKS).count()
        if skipped:
            self.message_user(
                request,
                f"Left {skipped} rule task{'s' if skipped != 1 else ''} alone: enable, "
                "disable or change the scaling or calendar rule in the console.",
                level=messages.WARNING,
            )
        return queryset.exclude(task__in=MANAGED_TASKS)

    @admin.action(description="Enable selected tasks")
    def enable_tasks(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        """The stock action on unmanaged tasks only."""
        super().enable_tasks(request, self._unmanaged(request, queryset))

    @admin.action(description="Disable selected tasks")
    def disable_tasks(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        """The stock action on unmanaged tasks only."""
        super().disable_tasks(request, self._unmanaged(request, queryset))

    @admin.action(description="Toggle activity of selected tasks")
    def toggle_tasks(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        """The stock action on unmanaged tasks only."""
        super().toggle_tasks(request, self._unmanaged(request, queryset))


class ManagedCrontabScheduleAdmin(CrontabScheduleAdmin):  # type: ignore[misc]
    """Crontab schedules; one a scaling rule's task uses is read-only (see above)."""

    def _used_by_rule(self, obj: Any) -> bool:
        return obj is not None and obj.periodictask_set.filter(task__in=MANAGED_TASKS).exists()

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Not while a scaling rule's task uses it."""
        return not self._used_by_rule(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Not while a scaling rule's task uses it."""
        return not self._used_by_rule(obj) and super().has_delete_permission(request, obj)


# django_celery_beat.admin (imported above) registered the stock classes; replace them.
admin.site.unregister(PeriodicTask)
admin.site.register(PeriodicTask, ManagedPeriodicTaskAdmin)
admin.site.unregister(CrontabSchedule)
admin.site.register(CrontabSchedule, ManagedCrontabScheduleAdmin)
