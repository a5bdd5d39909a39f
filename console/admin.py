"""The Django admin's shared base: the console owns every write, so its models are read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Lists rows but changes none: edits would skip the services' checks, audit and events."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Add through the console."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Change through the console."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Delete through the console."""
        return False


class ReadOnlyInline(admin.TabularInline):  # type: ignore[type-arg]
    """Rows shown under their parent, read-only for the same reason."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Add through the console."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Change through the console."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Delete through the console."""
        return False
