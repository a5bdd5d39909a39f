"""Django admin for workspaces: browse only; every change goes through the services."""

from __future__ import annotations

from django.contrib import admin

from console.admin import ReadOnlyAdmin
from workspaces.models import Membership, ResourceUsageRule, Workspace, WorkspaceQuota


@admin.register(Workspace)
class WorkspaceAdmin(ReadOnlyAdmin):
    """Workspaces."""

    list_display = ("name", "description", "created_at")
    search_fields = ("name",)


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    """Members and roles."""

    list_display = ("workspace", "user", "role")
    list_filter = ("role", "workspace")
    list_select_related = ("workspace", "user")
    search_fields = ("workspace__name", "user__username")


@admin.register(WorkspaceQuota)
class WorkspaceQuotaAdmin(ReadOnlyAdmin):
    """Quota bindings."""

    list_display = ("workspace", "quota")
    list_filter = ("workspace",)
    list_select_related = ("workspace", "quota")
    search_fields = ("workspace__name", "quota__name")


@admin.register(ResourceUsageRule)
class ResourceUsageRuleAdmin(ReadOnlyAdmin):
    """Resource-usage rules."""

    list_display = ("workspace", "quota", "role", "max_gpus", "max_priority")
    list_filter = ("role", "workspace")
    list_select_related = ("workspace", "quota")
    search_fields = ("workspace__name", "quota__name")
