"""Reads of workspaces, always through the user's object permissions."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from guardian.shortcuts import get_objects_for_user

from workspaces.models import Workspace
from workspaces.roles import VIEW


def workspaces_for_user(user: Any, perm: str = VIEW) -> QuerySet[Workspace]:
    """Workspaces the user holds `perm` on (all of them for platform admins)."""
    return get_objects_for_user(user, perm, klass=Workspace, accept_global_perms=True)
