"""Workspace roles map to object permissions on the workspace (django-guardian)."""

from __future__ import annotations

from workspaces.choices import Role

VIEW = "workspaces.view_workspace"
SUBMIT = "workspaces.submit_workspace"
MANAGE = "workspaces.manage_workspace"

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    Role.ADMIN: ("view_workspace", "submit_workspace", "manage_workspace"),
    Role.DEVELOPER: ("view_workspace", "submit_workspace"),
    Role.OPERATOR: ("view_workspace", "submit_workspace"),
    Role.VIEWER: ("view_workspace",),
}
ALL_PERMISSIONS = ("view_workspace", "submit_workspace", "manage_workspace")
