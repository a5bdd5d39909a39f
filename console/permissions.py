"""Cluster-wide permission: platform admins manage pools, nodes and quotas."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import AccessMixin
from django.http import HttpRequest, HttpResponseBase

PLATFORM_ADMIN_PERM = "cluster.manage_cluster"


def is_platform_admin(user: Any) -> bool:
    """True for users holding the global manage-cluster permission."""
    return bool(user.is_authenticated and user.has_perm(PLATFORM_ADMIN_PERM))


class PlatformAdminRequiredMixin(AccessMixin):
    """Send anonymous users to login and answer 404 to signed-in non-admins."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Check the global permission before the view runs."""
        from django.http import Http404

        if not request.user.is_authenticated:
            return self.handle_no_permission()
        if not is_platform_admin(request.user):
            raise Http404("No such page.")
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        return response
