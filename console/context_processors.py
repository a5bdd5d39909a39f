"""Template context shared by every page: the navigation the user may see."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from console.permissions import is_platform_admin


def navigation(request: HttpRequest) -> dict[str, Any]:
    """Tell the base template whether to show the platform-admin menu."""
    user = getattr(request, "user", None)
    return {"is_platform_admin": bool(user and user.is_authenticated and is_platform_admin(user))}
