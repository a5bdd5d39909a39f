"""Resource Quota pages for platform admins: the tree, add, scale, rebalance, toggle, delete,
and a quota's tabs (Overview, Nodes, Jobs, Monitoring).

Views parse a form, call one service and show its DomainError on the form; services are
atomic, so a refused change writes nothing. Scale and Rebalance preview the running jobs a
lower min would push out of quota, and apply only once the admin confirms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views import View
from django.views.generic import FormView, TemplateView

from console.errors import DomainError
from console.numbers import is_digits
from console.permissions import PlatformAdminRequiredMixin
from jobs import clock
from jobs.usage_selectors import BUCKET, quota_usage_series
from quotas import selectors
from quotas.charts import quota_figures
from quotas.forms import ChildPreemptionForm, NodePoolsForm, QuotaForm, RebalanceForm, ScaleForm
from quotas.models import Quota
from quotas.services.quotas import (
    quota_create,
    quota_delete,
    quota_rebalance,
    quota_scale,
    quota_set_child_preemption,
    quota_update,
)

if TYPE_CHECKING:
    QuotaFormView = FormView[QuotaForm]
    ScaleFormView = FormView[ScaleForm]
    RebalanceFormView = FormView[RebalanceForm]
    NodePoolsFormView = FormView[NodePoolsForm]
else:  # FormView is generic only in the stubs
    QuotaFormView = ScaleFormView = RebalanceFormView = NodePoolsFormView = FormView


class QuotaListView(PlatformAdminRequiredMixin, TemplateView):
    """The quota tree as an indented table, with each pool's unassigned capacity."""

    template_name = "quotas/list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Rows of the tree, in order, with their depth."""
        context = super().get_context_data(**kwargs)
        context["pools"] = selectors.quota_tree_by_pool()
        return context


class QuotaMixin(PlatformAdminRequiredMixin):
    """A page about one quota, loaded after the permission check (404 if there is none)."""

    kwargs: dict[str, Any]
    _quota: Quota | None = None

    @property
    def quota(self) -> Quota:
        """The quota of the URL."""
        if self._quota is None:
            self._quota = get_object_or_404(
                Quota.objects.select_related("parent", "resource_pool"), pk=self.kwargs["pk"]
            )
        return self._quota


class QuotaTabMixin(QuotaMixin):
    """One tab of a quota's page: the header with its actions and the tab bar."""

    tab = "overview"

    def tab_context(self) -> dict[str, Any]:
        """The quota, the active tab, and whether Rebalance has a sibling to move to."""
        return {
            "quota": self.quota,
            "tab": self.tab,
            "has_sibling": selectors.quota_has_sibling(self.quota),
        }


class QuotaOverviewView(QuotaTabMixin, TemplateView):
    """A quota: its amounts and usage, child-level preemption, children, workspaces, audit."""

    template_name = "quotas/overview.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The quota's overview (a fixed number of queries)."""
        context = super().get_context_data(**kwargs)
        overview = selectors.quota_overview(self.quota.pk)
        context["overview"] = overview
        context["quota"] = overview.quota
        context["tab"] = self.tab
        context["has_sibling"] = overview.has_sibling
        subtree = selectors.quota_subtree_ids(overview.quota)
        context["usage"] = selectors.quota_pool_usage(overview.quota, subtree)
        context["has_descendants"] = len(subtree) > 1
        return context


class QuotaNodesView(QuotaTabMixin, TemplateView):
    """The nodes of the quota's node pools and what its workloads hold on each."""

    template_name = "quotas/nodes.html"
    tab = "nodes"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Every node of the quota's pools (a fixed number of queries)."""
        context = super().get_context_data(**kwargs)
        context.update(self.tab_context())
        context["holdings"] = selectors.quota_nodes(
            self.quota, selectors.quota_subtree_ids(self.quota)
        )
        return context


class QuotaJobsView(QuotaTabMixin, TemplateView):
    """Running and pending workloads of the quota and its descendants, paged."""

    template_name = "quotas/jobs.html"
    tab = "jobs"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """One page of jobs (a fixed number of queries)."""
        context = super().get_context_data(**kwargs)
        context.update(self.tab_context())
        subtree = selectors.quota_subtree_ids(self.quota)
        context["jobs"] = selectors.quota_jobs(subtree, page=self.request.GET.get("page"))
        context["has_descendants"] = len(subtree) > 1
        return context


class QuotaMonitoringView(QuotaTabMixin, TemplateView):
    """The quota's allocation over the last 24 hours: In Quota vs borrowed, and pending."""

    template_name = "quotas/monitoring.html"
    tab = "monitoring"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The quota's figures (a fixed number of queries whatever the samples)."""
        context = super().get_context_data(**kwargs)
        context.update(self.tab_context())
        subtree = selectors.quota_subtree_ids(self.quota)
        series = quota_usage_series(
            quota_id=self.quota.pk, name=self.quota.name, subtree_ids=subtree
        )
        guaranteed = sum(a.min_gpu for a in selectors.quota_amounts(self.quota).values())
        context["series"] = series
        context["figures"] = quota_figures(series, guaranteed=guaranteed)
        context["bucket_minutes"] = int(BUCKET.total_seconds() // 60)
        context["has_descendants"] = len(subtree) > 1
        return context


class QuotaCreateView(PlatformAdminRequiredMixin, QuotaFormView):
    """Add Resource Quota: a root quota of a resource pool."""

    template_name = "quotas/form.html"
    form_class = QuotaForm

    def get_parent(self) -> Quota | None:
        """The fixed parent; None for a root quota."""
        return None

    def get_form_kwargs(self) -> dict[str, Any]:
        """Ask amounts for the parent's node pools, or for every node pool."""
        kwargs = super().get_form_kwargs()
        parent = self.get_parent()
        kwargs["parent"] = parent
        kwargs["parent_pools"] = selectors.quota_pools_in_effect(parent) if parent else None
        kwargs["node_pools"] = selectors.node_pools_for(parent.resource_pool if parent else None)
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The page title names the parent for a child quota."""
        context = super().get_context_data(**kwargs)
        parent = self.get_parent()
        context["parent"] = parent
        context["title"] = (
            f"New Child-level Resource Quota of {parent.name}" if parent else "Add Resource Quota"
        )
        context["submit_label"] = "Create"
        return context

    def form_valid(self, form: QuotaForm) -> HttpResponse:
        """Create the quota, or show why not."""
        try:
            quota = quota_create(actor=self.request.user, **form.service_kwargs())
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        messages.success(self.request, f"Created quota {quota.name}.")
        return redirect("quotas:list")


class QuotaChildCreateView(QuotaMixin, QuotaCreateView):
    """New Child-level Resource Quota: the same form with the parent fixed."""

    def get_parent(self) -> Quota | None:
        """The quota of the URL."""
        return self.quota


class QuotaScaleView(QuotaMixin, ScaleFormView):
    """Scale a quota's min and max on each node pool."""

    template_name = "quotas/form.html"
    form_class = ScaleForm

    def get_form_kwargs(self) -> dict[str, Any]:
        """Current amounts and version of the quota."""
        kwargs = super().get_form_kwargs()
        kwargs["node_pools"] = selectors.node_pools_for(self.quota.resource_pool)
        kwargs["amounts"] = selectors.quota_amounts(self.quota)
        kwargs["initial"] = {**kwargs.get("initial", {}), "version": self.quota.version}
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Title and the quota."""
        context = super().get_context_data(**kwargs)
        context["quota"] = self.quota
        context["title"] = f"Scale {self.quota.name}"
        context["submit_label"] = "Scale"
        return context

    def form_valid(self, form: ScaleForm) -> HttpResponse:
        """Preview the jobs a lower min would push out of quota; scale once confirmed."""
        if "back" in self.request.POST:
            return self.render_to_response(self.get_context_data(form=form))
        resources = form.resources()
        version = form.cleaned_data["version"]
        if "confirm" not in self.request.POST:
            try:
                preview = selectors.quota_scale_preview(
                    actor=self.request.user,
                    quota=self.quota,
                    resources=resources,
                    expected_version=version,
                    now=clock.now(),
                )
            except DomainError as err:
                form.add_service_error(err)
                return self.form_invalid(form)
            if preview.not_in_quota:
                changes = selectors.amount_changes(
                    form.node_pools, selectors.quota_amounts(self.quota), resources
                )
                return _preview_page(self.request, self.quota, form, preview, changes, "Scale")
        try:
            quota_scale(
                actor=self.request.user,
                quota=self.quota,
                resources=resources,
                expected_version=version,
            )
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        messages.success(self.request, f"Scaled quota {self.quota.name}. {_affected(self.request)}")
        return redirect("quotas:list")


class QuotaNodePoolsView(QuotaMixin, NodePoolsFormView):
    """Restrict the node pools a quota's workloads (and its descendants') may run in."""

    template_name = "quotas/node_pools.html"
    form_class = NodePoolsForm

    def get_form_kwargs(self) -> dict[str, Any]:
        """The pools its parent allows, the quota's own list and its version."""
        kwargs = super().get_form_kwargs()
        parent = self.quota.parent
        kwargs["quota"] = self.quota
        kwargs["node_pools"] = selectors.node_pools_for(self.quota.resource_pool)
        kwargs["parent_pools"] = selectors.quota_pools_in_effect(parent) if parent else None
        own = list(self.quota.allowed_node_pools.all())
        kwargs["initial"] = {"allowed_node_pools": own, "version": self.quota.version}
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Title and the quota."""
        context = super().get_context_data(**kwargs)
        context["quota"] = self.quota
        context["title"] = f"Node pools of {self.quota.name}"
        return context

    def form_valid(self, form: NodePoolsForm) -> HttpResponse:
        """Restrict (or free) the quota, or show why not."""
        pools = list(form.cleaned_data["allowed_node_pools"])
        try:
            quota_update(
                actor=self.request.user,
                quota=self.quota,
                expected_version=form.cleaned_data["version"],
                allowed_node_pools=pools,
            )
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        where = ", ".join(np.name for np in pools) if pools else "every pool its parent allows"
        if not pools and self.quota.parent is None:
            where = "every pool of its resource pool"
        messages.success(self.request, f"Workloads of {self.quota.name} now run in {where}.")
        return redirect("quotas:overview", self.quota.pk)


def _affected(request: HttpRequest) -> str:
    """What a change did to running jobs, for the message after it."""
    affected = request.POST.get("affected", "")
    count = int(affected) if "confirm" in request.POST and is_digits(affected) else 0
    if not count:
        return "No running job is affected."
    jobs = "job becomes" if count == 1 else "jobs become"
    return f"{count} running {jobs} Not in Quota (preemptible)."


def _preview_page(
    request: HttpRequest,
    quota: Quota,
    form: Any,
    preview: selectors.ScalePreview,
    changes: list[str],
    action: str,
) -> HttpResponse:
    """The step between the form and the change: which running jobs would lose their label."""
    return render(
        request,
        "quotas/preview.html",
        {
            "quota": quota,
            "form": form,
            "preview": preview,
            "changes": changes,
            "action": action,
            "title": f"{action} {quota.name}",
        },
    )


class QuotaRebalanceView(QuotaMixin, RebalanceFormView):
    """Move guaranteed amounts from this quota to a sibling."""

    template_name = "quotas/rebalance.html"
    form_class = RebalanceForm

    def get_form_kwargs(self) -> dict[str, Any]:
        """This quota is the source; its siblings are the targets."""
        kwargs = super().get_form_kwargs()
        kwargs["source"] = self.quota
        kwargs["siblings"] = selectors.quota_siblings(self.quota)
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Title and the quota."""
        context = super().get_context_data(**kwargs)
        context["quota"] = self.quota
        return context

    def form_valid(self, form: RebalanceForm) -> HttpResponse:
        """Preview the jobs the source would push out of quota; move once confirmed."""
        if "back" in self.request.POST:
            return self.render_to_response(self.get_context_data(form=form))
        kwargs = form.service_kwargs()
        if "confirm" not in self.request.POST:
            try:
                preview = selectors.quota_rebalance_preview(
                    actor=self.request.user, now=clock.now(), **kwargs
                )
            except DomainError as err:
                form.add_service_error(err)
                return self.form_invalid(form)
            if preview.not_in_quota:
                changes = [form.change_line()]
                return _preview_page(self.request, self.quota, form, preview, changes, "Rebalance")
        try:
            source, target = quota_rebalance(actor=self.request.user, **kwargs)
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        messages.success(
            self.request,
            f"Moved guaranteed resources from {source} to {target}. {_affected(self.request)}",
        )
        return redirect("quotas:list")


class QuotaChildPreemptionView(QuotaMixin, View):
    """Turn child-level preemption on or off (POST only)."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """Toggle, then go back to the overview with what happened."""
        form = ChildPreemptionForm(request.POST)
        form.is_valid()  # a boolean and an optional integer cannot be invalid
        enabled = bool(form.cleaned_data.get("enabled"))
        try:
            quota_set_child_preemption(
                actor=request.user,
                quota=self.quota,
                enabled=enabled,
                expected_version=form.cleaned_data.get("version"),
            )
        except DomainError as err:
            messages.error(request, err.message)
        else:
            state = "on" if enabled else "off"
            messages.success(request, f"Child-level preemption of {self.quota.name} is {state}.")
        return HttpResponseRedirect(reverse("quotas:overview", args=[self.quota.pk]))


class QuotaDeleteView(QuotaMixin, TemplateView):
    """Confirm and delete a quota; refused while it has children or bound workspaces."""

    template_name = "quotas/delete.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The quota to delete."""
        context = super().get_context_data(**kwargs)
        context["quota"] = self.quota
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """Delete, or show why not."""
        name = self.quota.name
        try:
            quota_delete(actor=request.user, quota=self.quota)
        except DomainError as err:
            return self.render_to_response(self.get_context_data(error=err.message))
        messages.success(request, f"Deleted quota {name}.")
        return redirect("quotas:list")
