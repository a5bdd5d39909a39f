"""Node pool and node pages for platform admins."""

from __future__ import annotations

from typing import Any

from django.views.generic import TemplateView

from console.permissions import PlatformAdminRequiredMixin
from quotas.models import NodePool


class NodePoolListView(PlatformAdminRequiredMixin, TemplateView):
    """Node pools with their node and GPU counts."""

    template_name = "nodes/pools.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Every node pool."""
        context = super().get_context_data(**kwargs)
        context["node_pools"] = NodePool.objects.select_related("resource_pool")
        return context
