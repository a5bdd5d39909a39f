"""Inference service pages: list, detail with scaling rules, create, Scale."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views import View
from django.views.generic import FormView, TemplateView

from console.confirm import confirm_or_apply
from console.errors import DomainError
from jobs import selectors
from jobs.choices import ENDED_STATUSES, Kind, PodStatus
from jobs.forms import ScaleForm, ScalingRuleForm, ServiceCreateForm
from jobs.models import ScalingRule, Workload
from jobs.services.scaling import (
    next_firing,
    scaling_rule_create,
    scaling_rule_delete,
    scaling_rule_update,
    service_scale,
)
from jobs.services.workloads import Shape, service_create
from jobs.views import Readable, SubmitView, effects, now, refuse, row
from workspaces.pages import WorkspacePageMixin
from workspaces.roles import SUBMIT


def _service(view: WorkspacePageMixin, pk: int) -> Workload:
    return selectors.workload_in_workspace(view.workspace, pk, Kind.INFERENCE)


def _running(service: Workload) -> int:
    return sum(1 for p in service.pods.all() if p.status == PodStatus.RUNNING)


class ServiceListView(WorkspacePageMixin, TemplateView):
    """The workspace's inference services, replicas running / target."""

    template_name = "jobs/service_list.html"
    tab = "services"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Every service with its pods prefetched (a fixed number of queries)."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        services = selectors.workload_page(
            selectors.workspace_workloads(self.workspace, Kind.INFERENCE).order_by("name")
        )
        moment = now()
        context["rows"] = [(row(s, moment), _running(s)) for s in services]
        return context


def _rules(service: Workload) -> list[tuple[ScalingRule, Any]]:
    moment = now()
    return [(rule, next_firing(rule, moment)) for rule in service.scaling_rules.all()]


class ServiceDetailView(WorkspacePageMixin, TemplateView):
    """One service: replicas, pods, scaling rules with their next firing, Scale, timeline."""

    template_name = "jobs/service_detail.html"
    tab = "services"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The service, its rules and the forms the user may use."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        service = _service(self, kwargs["pk"])
        # A service never borrows; shown through the same rules as a job all the same.
        readable = Readable(service, self.request.user)
        pods = sorted(service.pods.all(), key=lambda p: (-p.index, -p.attempt))
        context.update(
            service=service,
            running=_running(service),
            pods=readable.pods(pods[:50]),
            more_pods=max(len(pods) - 50, 0),
            rules=_rules(service),
            events=readable.events(list(service.events.all())[::-1][:100]),
            scale_form=kwargs.get("scale_form")
            or ScaleForm(initial={"replicas": service.replicas}),
            rule_form=kwargs.get("rule_form") or ScalingRuleForm(initial={"timezone": "UTC"}),
            ended=service.status in ENDED_STATUSES,
        )
        return context


class ServiceCreateView(SubmitView):
    """New inference service in a quota the user's rules allow."""

    template_name = "jobs/service_form.html"
    form_class = ServiceCreateForm
    tab = "services"
    verb = "Created"

    def create(self, form: ServiceCreateForm) -> Workload:
        """service_create."""
        data = form.cleaned_data
        return service_create(
            actor=self.request.user,
            access=self.access,
            workspace=self.workspace,
            quota=data["quota"],
            name=data["name"],
            shape=Shape(**form.shape_values()),
            node_pools=[data["node_pool"]],
            min_replicas=data["min_replicas"],
            max_replicas=data["max_replicas"],
        )

    def done(self, workload: Workload) -> HttpResponse:
        """To the new service's page."""
        return redirect("jobs:service_detail", workspace=self.workspace.name, pk=workload.pk)


class _ServiceAction(WorkspacePageMixin, View):
    """A POST on one service (submit permission); a refusal re-renders the detail page."""

    permission = SUBMIT

    def again(self, request: HttpRequest, pk: int, **forms: Any) -> HttpResponse:
        """The detail page with the refused form and its errors."""
        detail = ServiceDetailView()
        detail.setup(request, workspace=self.workspace.name, pk=pk)
        detail.workspace, detail.access = self.workspace, self.access
        context = detail.get_context_data(pk=pk, **forms)
        return TemplateResponse(request, detail.template_name, context, status=400)


class ServiceScaleView(_ServiceAction):
    """Manual Scale: set the target replicas now; scaling down is confirmed first."""

    tab = "services"  # the confirmation page sits under this tab

    def post(self, request: HttpRequest, workspace: str, pk: int) -> HttpResponse:
        """service_scale, then back to the service; a lower target is confirmed first."""
        service = _service(self, pk)
        form = ScaleForm(request.POST)
        if form.is_valid():
            replicas = form.cleaned_data["replicas"]
            # Only a cut the service would make is confirmed; a refusal shows on the form.
            cut = service.min_replicas <= replicas < service.replicas
            if cut and service.status not in ENDED_STATUSES:
                confirmation = effects.service_scale_down(
                    service, replicas, workspace=workspace, chrome=self.workspace_context()
                )
                if page := confirm_or_apply(request, confirmation):
                    return page
            try:
                service_scale(
                    service=service,
                    replicas=replicas,
                    now=now(),
                    actor=request.user,
                )
            except DomainError as error:
                refuse(form, error)
            else:
                messages.success(request, f"{service.name}: target {replicas} replicas.")
                return redirect("jobs:service_detail", workspace=workspace, pk=pk)
        return self.again(request, pk, scale_form=form)


class ScalingRuleCreateView(_ServiceAction):
    """Add a scheduled scaling rule."""

    def post(self, request: HttpRequest, workspace: str, pk: int) -> HttpResponse:
        """scaling_rule_create, then back to the service."""
        service = _service(self, pk)
        form = ScalingRuleForm(request.POST)
        if form.is_valid():
            try:
                rule = scaling_rule_create(service=service, now=now(), **form.rule_values())
            except DomainError as error:
                refuse(form, error)
            else:
                messages.success(request, f"Added rule {rule.name}.")
                return redirect("jobs:service_detail", workspace=workspace, pk=pk)
        return self.again(request, pk, rule_form=form)


def _rule(service: Workload, rule_pk: int) -> ScalingRule:
    rule = next((r for r in service.scaling_rules.all() if r.pk == rule_pk), None)
    if rule is None:
        raise Http404("No such scaling rule.")
    return rule


class ScalingRuleUpdateView(WorkspacePageMixin, FormView):  # type: ignore[type-arg]
    """Edit one scaling rule."""

    template_name = "jobs/rule_form.html"
    form_class = ScalingRuleForm
    permission = SUBMIT
    tab = "services"

    def setup(self, request: HttpRequest, *args: Any, **kwargs: Any) -> None:
        """Remember the ids; objects load after the access check."""
        super().setup(request, *args, **kwargs)
        self.service_pk, self.rule_pk = kwargs["pk"], kwargs["rule"]

    def get_form_kwargs(self) -> dict[str, Any]:
        """The rule as it is."""
        self.service = _service(self, self.service_pk)
        self.rule = _rule(self.service, self.rule_pk)
        kwargs = super().get_form_kwargs()
        kwargs["instance"] = self.rule
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Tabs, service and rule."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context(), service=self.service, rule=self.rule)
        return context

    def form_valid(self, form: ScalingRuleForm) -> HttpResponse:
        """scaling_rule_update, then back to the service."""
        try:
            scaling_rule_update(rule=self.rule, now=now(), **form.rule_values())
        except DomainError as error:
            refuse(form, error)
            return self.form_invalid(form)
        messages.success(self.request, f"Saved rule {form.cleaned_data['name']}.")
        return redirect("jobs:service_detail", workspace=self.workspace.name, pk=self.service.pk)


class ScalingRuleDeleteView(_ServiceAction):
    """Delete one scaling rule (POST), once confirmed."""

    tab = "services"  # the confirmation page sits under this tab

    def post(self, request: HttpRequest, workspace: str, pk: int, rule: int) -> HttpResponse:
        """Confirm first (the scaling that will not happen); scaling_rule_delete, then back."""
        service = _service(self, pk)
        found = _rule(service, rule)
        confirmation = effects.rule_delete(
            service,
            found,
            next_firing(found, now()),
            workspace=workspace,
            chrome=self.workspace_context(),
        )
        if page := confirm_or_apply(request, confirmation):
            return page
        scaling_rule_delete(rule=found)
        messages.success(request, f"Deleted rule {found.name}.")
        return redirect("jobs:service_detail", workspace=workspace, pk=pk)


class ServiceLiveView(WorkspacePageMixin, View):
    """The service page's replica count, re-fetched on each of its events."""

    def get(self, request: HttpRequest, workspace: str, pk: int) -> HttpResponse:
        """Running / target."""
        service = _service(self, pk)
        return HttpResponse(
            f"{_running(service)} / {service.replicas}", content_type="text/plain; charset=utf-8"
        )
