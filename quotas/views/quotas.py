"""Resource Quota pages for platform admins: add, settings, node pools, toggle, delete.

Views parse a form, call one service and show its DomainError on the form; services are
atomic, so a refused change writes nothing. The pages that read workloads (the tree with its
usage, the Add forms with their headroom, a quota's tabs, and Scale and Rebalance with their
preview of running jobs) are in dashboard/views/: they extend these where they share a form.
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
from quotas.forms import (
    ChildPreemptionForm,
    NodePoolsForm,
    QuotaForm,
    QuotaSettingsForm,
    RebalanceForm,
    ScaleForm,
)
from quotas.models import Quota
from quotas.services.quotas import (
    StaleVersion,
    quota_create,
    quota_delete,
    quota_set_child_preemption,
    quota_update,
)

if TYPE_CHECKING:
    QuotaFormView = FormView[QuotaForm]
    ScaleFormView = FormView[ScaleForm]
    RebalanceFormView = FormView[RebalanceForm]
    NodePoolsFormView = FormView[NodePoolsForm]
    SettingsFormView = FormView[QuotaSettingsForm]
else:  # FormView is generic only in the stubs
    QuotaFormView = ScaleFormView = RebalanceFormView = NodePoolsFormView = FormView
    SettingsFormView = FormView


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


def _pool_choices(quota: Quota) -> dict[str, Any]:
    """What a form offering a quota's node pools needs: the quota, its resource pool's node
    pools and the ones its parent allows (None at the top)."""
    parent = quota.parent
    return {
        "quota": quota,
        "node_pools": selectors.node_pools_for(quota.resource_pool),
        "parent_pools": selectors.quota_pools_in_effect(parent) if parent else None,
    }


class QuotaNodePoolsView(QuotaMixin, NodePoolsFormView):
    """Restrict the node pools a quota's workloads (and its descendants') may run in."""

    template_name = "quotas/node_pools.html"
    form_class = NodePoolsForm

    def get_form_kwargs(self) -> dict[str, Any]:
        """The pools its parent allows, the quota's own list and its version."""
        kwargs = {**super().get_form_kwargs(), **_pool_choices(self.quota)}
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


class QuotaSettingsView(QuotaMixin, SettingsFormView):
    """A quota's name and scheduling settings, saved through quota_update (as the API's PATCH)
    only if nobody changed the quota since the page was loaded."""

    template_name = "quotas/settings.html"
    form_class = QuotaSettingsForm

    def get_form_kwargs(self) -> dict[str, Any]:
        """The quota, the node pools it may be restricted to, and its stored settings."""
        kwargs = {**super().get_form_kwargs(), **_pool_choices(self.quota)}
        kwargs["initial"] = QuotaSettingsForm.initial_for(self.quota)
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Title and the quota."""
        context = super().get_context_data(**kwargs)
        context["quota"] = self.quota
        context["title"] = f"Settings of {self.quota.name}"
        return context

    def form_valid(self, form: QuotaSettingsForm) -> HttpResponse:
        """Save what changed, or show why not; a refused change writes nothing."""
        changes = form.changes()
        if not changes:
            messages.info(self.request, f"Nothing changed in {self.quota.name}.")
            return redirect("quotas:overview", self.quota.pk)
        try:
            quota = quota_update(
                actor=self.request.user,
                quota=self.quota,
                expected_version=form.cleaned_data["version"],
                **changes,
            )
        except StaleVersion as err:
            form.add_error(
                None,
                f"{err.message} Nothing was saved. Reload the page to see its settings now, "
                "then make your change again.",
            )
            return self.render_to_response(self.get_context_data(form=form, stale=True))
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        messages.success(self.request, f"Saved the settings of {quota.name}.")
        return redirect("quotas:overview", quota.pk)


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
