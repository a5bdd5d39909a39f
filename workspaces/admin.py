"""Django admin for workspaces: browse only; every change goes through the services."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from workspaces.models import Membership, ResourceUsageRule, Workspace, WorkspaceQuota


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Lists rows but changes none: edits would skip the services' checks and permission sync."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Add through the console."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Change through the console."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Delete through the console."""
        return False


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


@admin.register(WorkspaceQuota)
class WorkspaceQuotaAdmin(ReadOnlyAdmin):
    """Quota bindings."""

    list_display = ("workspace", "quota")


@admin.register(ResourceUsageRule)
class ResourceUsageRuleAdmin(ReadOnlyAdmin):
    """Resource-usage rules."""

    list_display = ("workspace", "quota", "role", "max_gpus", "max_priority")
