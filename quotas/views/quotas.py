"""Resource Quota pages for platform admins: the tree, add, scale, rebalance, toggle, delete.

Views parse a form, call one service and show its DomainError on the form; services are
atomic, so a refused change writes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views import View
from django.views.generic import FormView, TemplateView

from console.errors import DomainError
from console.permissions import PlatformAdminRequiredMixin
from quotas import selectors
from quotas.forms import ChildPreemptionForm, QuotaForm, RebalanceForm, ScaleForm
from quotas.models import Quota
from quotas.services.quotas import (
    quota_create,
    quota_delete,
    quota_rebalance,
    quota_scale,
    quota_set_child_preemption,
)

if TYPE_CHECKING:
    QuotaFormView = FormView[QuotaForm]
    ScaleFormView = FormView[ScaleForm]
    RebalanceFormView = FormView[RebalanceForm]
else:  # FormView is generic only in the stubs
    QuotaFormView = ScaleFormView = RebalanceFormView = FormView


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


class QuotaOverviewView(QuotaMixin, TemplateView):
    """A quota: its amounts, child-level preemption, children, workspaces and audit log."""

    template_name = "quotas/overview.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The quota's overview."""
        context = super().get_context_data(**kwargs)
        context["overview"] = selectors.quota_overview(self.quota.pk)
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
        """Scale the quota, or show why not."""
        try:
            quota_scale(
                actor=self.request.user,
                quota=self.quota,
                resources=form.resources(),
                expected_version=form.cleaned_data["version"],
            )
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        messages.success(self.request, f"Scaled quota {self.quota.name}.")
        return redirect("quotas:list")


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
        """Move the amounts, or show why not."""
        try:
            source, target = quota_rebalance(actor=self.request.user, **form.service_kwargs())
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        messages.success(self.request, f"Moved guaranteed resources from {source} to {target}.")
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
