"""Workspace pages: each user sees only the workspaces they belong to."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.views.generic import TemplateView

from workspaces.selectors import workspaces_for_user


class WorkspaceListView(LoginRequiredMixin, TemplateView):
    """The workspaces the user may see."""

    template_name = "workspaces/list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Only visible workspaces."""
        context = super().get_context_data(**kwargs)
        context["workspaces"] = workspaces_for_user(self.request.user).prefetch_related("quotas")
        return context
