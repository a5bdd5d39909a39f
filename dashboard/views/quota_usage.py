"""Usage where decisions are made: the quota tree with what each quota holds, the Add forms
with the headroom left, and the read-only overview a member opens of a quota bound to their
workspace. They read workloads, so they live here (quotas never imports jobs); the forms and
their services are quotas'.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.views.generic import TemplateView

from console import clock
from console.permissions import PlatformAdminRequiredMixin
from dashboard.selectors.quota_usage import (
    PREEMPTION_WINDOW,
    form_headroom,
    member_quota_overview,
    quota_tree_usage,
)
from quotas.models import Quota
from quotas.views.quotas import QuotaChildCreateView, QuotaCreateView
from workspaces.pages import WorkspacePageMixin


class QuotaTreeView(PlatformAdminRequiredMixin, TemplateView):
    """The quota tree as an indented table: per quota and node pool, guaranteed / limit and
    what its subtree holds In Quota, borrows and waits for (a fixed number of queries)."""

    template_name = "quotas/list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Each resource pool's tree with usage; `pools` is the bare tree, as before."""
        context = super().get_context_data(**kwargs)
        trees = quota_tree_usage()
        context["trees"] = trees
        context["pools"] = [t.tree for t in trees]
        return context


class _HeadroomMixin:
    """An Add form that shows, per node pool, what is left to guarantee and what runs now."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The form's context and its node pools' headroom."""
        context: dict[str, Any] = super().get_context_data(**kwargs)  # type: ignore[misc]
        form = context["form"]
        parent = self.get_parent()  # type: ignore[attr-defined]
        context["add_headroom"] = form_headroom(parent=parent, node_pools=form.node_pools)
        return context


class QuotaAddView(_HeadroomMixin, QuotaCreateView):
    """Add Resource Quota, with each node pool's unassigned capacity and usage."""


class QuotaChildAddView(_HeadroomMixin, QuotaChildCreateView):
    """New Child-level Resource Quota, with what the parent has left and what it runs."""


class MemberQuotaView(WorkspacePageMixin, TemplateView):
    """A quota bound to the workspace, read-only, as its members see it: guaranteed, in use,
    borrowed, pending, and why the workspace's jobs wait.

    Access is the workspace's (WorkspacePageMixin): anonymous users go to login, a workspace
    out of sight and a quota not bound to it answer 404; platform admins see every workspace.
    """

    template_name = "workspaces/quota.html"
    workspace_kwarg = "name"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The overview (a fixed number of queries)."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        quota = get_object_or_404(
            Quota.objects.select_related("parent", "resource_pool"),
            pk=self.kwargs["quota_id"],
            bindings__workspace=self.workspace,
        )
        context["tab"] = "overview"
        context["quota"] = quota
        context["overview"] = member_quota_overview(
            quota=quota, workspace=self.workspace, now=clock.now()
        )
        context["window_hours"] = int(PREEMPTION_WINDOW.total_seconds() // 3600)
        return context
