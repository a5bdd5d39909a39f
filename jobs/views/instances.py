"""Interactive instance pages: list with time left, start, stop."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views import View
from django.views.generic import TemplateView

from console.confirm import confirm_or_apply
from console.errors import DomainError
from jobs import selectors
from jobs.choices import Kind
from jobs.forms import InstanceStartForm
from jobs.models import Workload
from jobs.services.workloads import Shape, instance_start, workload_cancel
from jobs.views import SubmitView, effects, now, row
from workspaces.pages import WorkspacePageMixin
from workspaces.roles import SUBMIT
from workspaces.selectors import instance_limits


class InstanceListView(WorkspacePageMixin, TemplateView):
    """The workspace's interactive instances, newest first, with time left."""

    template_name = "jobs/instance_list.html"
    tab = "instances"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The latest 100 instances with pods (a fixed number of queries)."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        instances = selectors.workload_page(
            selectors.workspace_workloads(self.workspace, Kind.INTERACTIVE)
        )[:100]
        moment = now()
        context["rows"] = [row(i, moment) for i in instances]
        return context


class InstanceStartView(SubmitView):
    """Start an interactive instance with a time limit."""

    template_name = "jobs/instance_form.html"
    form_class = InstanceStartForm
    tab = "instances"
    verb = "Started"

    def get_form_kwargs(self) -> dict[str, Any]:
        """The workspace's time limits too: a default makes the duration optional."""
        kwargs = super().get_form_kwargs()
        kwargs["limits"] = instance_limits(self.workspace)
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The workspace's time limits, shown above the form."""
        context = super().get_context_data(**kwargs)
        context["limits"] = instance_limits(self.workspace)
        return context

    def create(self, form: InstanceStartForm) -> Workload:
        """instance_start; an empty duration takes the workspace's default."""
        data = form.cleaned_data
        hours = data.get("max_hours")
        return instance_start(
            actor=self.request.user,
            access=self.access,
            workspace=self.workspace,
            quota=data["quota"],
            name=data["name"],
            shape=Shape(**form.shape_values()),
            node_pools=[data["node_pool"]],
            max_duration=None if hours is None else int(hours * 3600),
            idle_stop_minutes=data.get("idle_stop_minutes"),
        )

    def done(self, workload: Workload) -> HttpResponse:
        """Back to the instances list."""
        return redirect("jobs:instance_list", workspace=self.workspace.name)


class InstanceStopView(WorkspacePageMixin, View):
    """Stop an interactive instance (POST; submit permission), once confirmed."""

    tab = "instances"  # the confirmation page sits under this tab
    permission = SUBMIT

    def post(self, request: HttpRequest, workspace: str, pk: int) -> HttpResponse:
        """Confirm first (its GPUs, its unsaved work); workload_cancel stops an instance."""
        instance = selectors.workload_in_workspace(self.workspace, pk, Kind.INTERACTIVE)
        confirmation = effects.instance_stop(
            instance, workspace=workspace, now=now(), chrome=self.workspace_context()
        )
        if page := confirm_or_apply(request, confirmation):
            return page
        try:
            workload_cancel(actor=request.user, workload=instance)
        except DomainError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Stopped {instance.name}.")
        return redirect("jobs:instance_list", workspace=workspace)
