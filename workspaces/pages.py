"""The one mixin of every page of a workspace: its access is decided once, here."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import get_object_or_404

from workspaces.access import Access
from workspaces.choices import Role
from workspaces.models import Workspace
from workspaces.roles import MANAGE, SUBMIT, VIEW
from workspaces.selectors import workspace_role


class WorkspacePageMixin(AccessMixin):
    """Resolve the workspace the URL names through the user's Access, built once per request.

    Anonymous users go to login; a workspace the user may not view answers 404; one they may
    view but where they lack `permission` (or, with `platform_admin_only`, are no platform
    admin) answers 403. `workspace_kwarg` is the URL's name for the workspace.
    """

    permission: str = VIEW
    platform_admin_only: bool = False
    workspace_kwarg: str = "workspace"
    tab: str = ""
    access: Access
    workspace: Workspace
    request: HttpRequest

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Login, then 404 for a workspace out of sight, then 403 without the permission."""
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        self.access = Access(request.user)
        self.workspace = get_object_or_404(
            self.access.workspaces(), name=kwargs[self.workspace_kwarg]
        )
        if self.platform_admin_only and not self.access.platform_admin:
            raise PermissionDenied("Only platform admins may do this.")
        self.access.require(self.permission, self.workspace)
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        return response

    def workspace_context(self) -> dict[str, Any]:
        """What every tab of the workspace shows."""
        role = workspace_role(self.request.user, self.workspace)
        return {
            "workspace": self.workspace,
            "role": Role(role).label if role else None,
            "can_submit": self.access.has_perm(SUBMIT, self.workspace),
            "can_manage": self.access.has_perm(MANAGE, self.workspace),
            "is_platform_admin": self.access.platform_admin,
            "tab": self.tab,
        }
