"""The landing page (admins go to the quota tree, team members to their workspaces), and the
page of a form whose CSRF token failed."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from console.permissions import is_platform_admin


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Send each user to the page they work from."""
    if is_platform_admin(request.user):
        return redirect("quotas:list")
    return redirect("workspaces:list")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form posted with a stale or missing token: the app's 403 page, saying what to do."""
    return render(request, "403.html", {"csrf_failed": True}, status=403)
