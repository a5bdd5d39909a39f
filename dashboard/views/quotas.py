"""The quota pages that read workloads: a quota's tabs (Overview, Nodes, Jobs, Monitoring),
and Scale and Rebalance, which preview the running jobs a lower min would push out of quota
and apply only once the admin confirms. Their URLs join the quotas namespace (console/urls.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.generic import FormView, TemplateView

from console import clock
from console.errors import DomainError
from console.numbers import is_digits
from dashboard.charts import quota_figures
from dashboard.selectors import quotas as reads
from dashboard.selectors.usage import BUCKET, quota_usage_series
from quotas import selectors
from quotas.forms import RebalanceForm, ScaleForm
from quotas.models import Quota
from quotas.services.quotas import quota_rebalance, quota_scale
from quotas.views.quotas import QuotaMixin, QuotaTabMixin

if TYPE_CHECKING:
    ScaleFormView = FormView[ScaleForm]
    RebalanceFormView = FormView[RebalanceForm]
else:  # FormView is generic only in the stubs
    ScaleFormView = RebalanceFormView = FormView


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
        context["usage"] = reads.quota_pool_usage(overview.quota, subtree)
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
        context["holdings"] = reads.quota_nodes(self.quota, selectors.quota_subtree_ids(self.quota))
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
        context["jobs"] = reads.quota_jobs(subtree, page=self.request.GET.get("page"))
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
                preview = reads.quota_scale_preview(
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
    preview: reads.ScalePreview,
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
                preview = reads.quota_rebalance_preview(
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
