"""Resource Quota pages for platform admins."""

from __future__ import annotations

from typing import Any

from django.views.generic import TemplateView

from console.permissions import PlatformAdminRequiredMixin
from quotas import selectors


class QuotaListView(PlatformAdminRequiredMixin, TemplateView):
    """The quota tree as an indented table, with each pool's unassigned capacity."""

    template_name = "quotas/list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Rows of the tree, in order, with their depth."""
        context = super().get_context_data(**kwargs)
        context["pools"] = selectors.quota_tree_by_pool()
        return context
