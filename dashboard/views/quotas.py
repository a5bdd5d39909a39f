"""The quota pages that read workloads: a quota's tabs (Overview, Nodes, Jobs, Monitoring),
and Scale and Rebalance, which preview the running jobs a lower min would push out of quota
and apply only once the admin confirms. Their URLs join the quotas namespace (console/urls.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.generic import FormView, TemplateView

from cluster.models import NodePool
from console import clock
from console.confirm import Confirmation, confirm_page, confirmed
from console.errors import DomainError
from console.units import called, milli_to_gpus
from dashboard.charts import quota_figures
from dashboard.selectors import quotas as reads
from dashboard.selectors.headroom import quota_headroom
from dashboard.selectors.usage import BUCKET, quota_usage_series
from jobs.models import Workload
from quotas import selectors
from quotas.amounts import RESOURCES, Amounts
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
    """Scale a quota's min and max on each node pool; a cut is confirmed first."""

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
        """Title, the quota, and its usage and headroom before anything is typed."""
        context = super().get_context_data(**kwargs)
        context["quota"] = self.quota
        context["title"] = f"Scale {self.quota.name}"
        context["submit_label"] = "Scale"
        context["headroom"] = quota_headroom(self.quota)
        return context

    def form_valid(self, form: ScaleForm) -> HttpResponse:
        """Preview what the change does to running jobs; a cut applies only once confirmed.

        Raising a quota harms nothing and applies at once. Lowering any min or max, even one
        that touches no running job, shows the confirmation first (console.confirm).
        """
        if "back" in self.request.POST:
            return self.render_to_response(self.get_context_data(form=form))
        resources = form.resources()
        version = form.cleaned_data["version"]
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
        current = selectors.quota_amounts(self.quota)
        if _cuts(current, resources):
            changes = selectors.amount_changes(form.node_pools, current, resources)
            confirmation = _confirmation(self.quota, changes, preview, "Scale")
            if not confirmed(self.request, confirmation):
                return _preview_page(self.request, self.quota, confirmation, preview)
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
        messages.success(self.request, f"Scaled quota {self.quota.name}. {_affected(preview)}")
        return redirect("quotas:list")


def _cuts(current: dict[int, Amounts], proposed: Mapping[NodePool, Amounts]) -> bool:
    """Whether a scale lowers any min or max (a new limit where there was none included)."""
    for node_pool, new in proposed.items():
        old = current.get(node_pool.pk, Amounts())
        for r in RESOURCES:
            if new.min(r) < old.min(r):
                return True
            new_max, old_max = new.max(r), old.max(r)
            if new_max is not None and (old_max is None or new_max < old_max):
                return True
    return False


def _jobs_line(jobs: list[Workload], verb: str, label: str) -> str:
    """ "2 running jobs (16 GPUs) become Not in Quota"."""
    count = len(jobs)
    held = milli_to_gpus(sum(w.total_gpu for w in jobs))
    noun = "running job" if count == 1 else "running jobs"
    return f"{count} {noun} ({held} GPUs) {verb if count == 1 else verb[:-1]} {label}"


def _affected(preview: reads.ScalePreview) -> str:
    """What a change did to running jobs, for the message after it."""
    count = len(preview.not_in_quota)
    if not count:
        return "No running job is affected."
    jobs = "job becomes" if count == 1 else "jobs become"
    return f"{count} running {jobs} Not in Quota (preemptible)."


def _confirmation(
    quota: Quota, changes: list[str], preview: reads.ScalePreview, action: str
) -> Confirmation:
    """The effect of a scale or rebalance: the amounts, then the running jobs it relabels."""
    effects = [f"{called(quota.name)}: {line}." for line in changes]
    if preview.not_in_quota:
        effects.append(
            _jobs_line(preview.not_in_quota, "becomes", "Not in Quota")
            + (": it keeps" if len(preview.not_in_quota) == 1 else ": they keep")
            + " running on borrowed capacity, but may be preempted."
        )
    else:
        effects.append("No running job is affected: every running job stays In Quota.")
    if preview.in_quota:
        effects.append(_jobs_line(preview.in_quota, "becomes", "In Quota") + ".")
    # The amounts too: a rebalance carries no version, so a change meanwhile shows here.
    jobs = ",".join(str(w.pk) for w in sorted(preview.not_in_quota, key=lambda w: w.pk))
    facts = f"{jobs or 'none'}|{';'.join(changes)}"
    return Confirmation(
        title=f"{action} {quota.name}",
        effects=effects,
        action=f"Confirm {action.lower()}",
        back=reverse("quotas:list"),
        facts=facts,
    )


def _preview_page(
    request: HttpRequest, quota: Quota, confirmation: Confirmation, preview: reads.ScalePreview
) -> HttpResponse:
    """The step between the form and the change: the shared confirmation with the job table."""
    return confirm_page(
        request,
        confirmation,
        template="quotas/preview.html",
        extra={"quota": quota, "preview": preview, "back_button": True},
    )


class QuotaRebalanceView(QuotaMixin, RebalanceFormView):
    """Move guaranteed amounts from this quota to a sibling, once confirmed."""

    template_name = "quotas/rebalance.html"
    form_class = RebalanceForm

    def get_form_kwargs(self) -> dict[str, Any]:
        """This quota is the source; its siblings are the targets."""
        kwargs = super().get_form_kwargs()
        kwargs["source"] = self.quota
        kwargs["siblings"] = selectors.quota_siblings(self.quota)
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The quota, and its usage and headroom before anything is typed."""
        context = super().get_context_data(**kwargs)
        context["quota"] = self.quota
        context["headroom"] = quota_headroom(self.quota)
        return context

    def form_valid(self, form: RebalanceForm) -> HttpResponse:
        """Preview the jobs the source would push out of quota; move once confirmed.

        A rebalance always lowers the source, so it always asks, even when no job is touched.
        """
        if "back" in self.request.POST:
            return self.render_to_response(self.get_context_data(form=form))
        kwargs = form.service_kwargs()
        try:
            preview = reads.quota_rebalance_preview(
                actor=self.request.user, now=clock.now(), **kwargs
            )
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        confirmation = _confirmation(self.quota, _moves(form), preview, "Rebalance")
        if not confirmed(self.request, confirmation):
            return _preview_page(self.request, self.quota, confirmation, preview)
        try:
            source, target = quota_rebalance(actor=self.request.user, **kwargs)
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        messages.success(
            self.request,
            f"Moved guaranteed resources from {source} to {target}. {_affected(preview)}",
        )
        return redirect("quotas:list")


def _moves(form: RebalanceForm) -> list[str]:
    """The move, then each quota's GPUs before and after it."""
    data = form.cleaned_data
    lines = [f"move {form.change_line()}"]
    gpu = data.get("gpu") or 0
    if gpu:
        node_pool = data["node_pool"]
        for quota, sign in ((form.source, -1), (data["target"], 1)):
            before = selectors.quota_amounts(quota).get(node_pool.pk, Amounts()).min_gpu
            after = before + sign * gpu
            lines.append(
                f"{quota.name} {node_pool.name} GPU min "
                f"{milli_to_gpus(before)} → {milli_to_gpus(after)}"
            )
    return lines
