"""The landing page: admins go to the quota tree, team members to their workspaces."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from console.permissions import is_platform_admin


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Send each user to the page they work from."""
    if is_platform_admin(request.user):
        return redirect("quotas:list")
    return redirect("workspaces:list")
