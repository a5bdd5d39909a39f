"""Interactive instance pages: list with time left, one instance with its Open link, start, stop."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views import View
from django.views.generic import TemplateView

from console.confirm import confirm_or_apply
from console.errors import DomainError
from jobs import selectors, views
from jobs.backends import get_backend
from jobs.choices import ACTIVE_STATUSES, WAITING_STATUSES, Kind, PodStatus, Status
from jobs.forms import InstanceStartForm
from jobs.models import Pod, Workload
from jobs.services.workloads import Shape, instance_start, workload_cancel
from jobs.views import SubmitView, effects, now, row
from workspaces.pages import WorkspacePageMixin
from workspaces.roles import SUBMIT
from workspaces.selectors import instance_limits

PAGE_SIZE = 25
SHOW_ACTIVE, SHOW_ALL = "active", "all"


class InstanceListView(WorkspacePageMixin, TemplateView):
    """The workspace's interactive instances, newest first, 25 a page, stopped ones hidden.

    `?show=all` lists stopped (ended) instances too; the default shows the active ones.
    """

    template_name = "jobs/instance_list.html"
    tab = "instances"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """One count and one page of rows with pods: a fixed number of queries."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        show = SHOW_ALL if self.request.GET.get("show") == SHOW_ALL else SHOW_ACTIVE
        found = selectors.workspace_workloads(self.workspace, Kind.INTERACTIVE)
        if show == SHOW_ACTIVE:
            found = found.filter(status__in=ACTIVE_STATUSES)
        found = found.order_by("-submitted_at", "-pk")
        paginator = Paginator(found, PAGE_SIZE)
        page = paginator.get_page(self.request.GET.get("page"))
        number, pages = page.number, paginator.num_pages
        start = (number - 1) * PAGE_SIZE
        moment = now()

        def link(**changes: Any) -> str:
            query = {"show": show if show == SHOW_ALL else None, **changes}
            return "?" + urlencode({k: v for k, v in query.items() if v not in ("", None)})

        context.update(
            rows=[row(i, moment) for i in selectors.workload_rows(found, start, start + PAGE_SIZE)],
            show=show,
            total=paginator.count,
            page=number,
            pages=pages,
            prev_link=link(page=number - 1) if number > 1 else None,
            next_link=link(page=number + 1) if number < pages else None,
            show_all_link="?" + urlencode({"show": SHOW_ALL}),
            show_active_link="?",
        )
        return context


def _open_url(instance: Workload, pods: list[Pod]) -> str | None:
    """The backend's link to the running instance's pod; None unless it runs."""
    if instance.status != Status.RUNNING:
        return None
    running = next((p for p in pods if p.status == PodStatus.RUNNING), None)
    if running is None:
        return None
    running.workload = instance  # the backend reads the workspace and name from here
    return get_backend().instance_url(running)


def _detail_context(request: HttpRequest, instance: Workload) -> dict[str, Any]:
    """What the instance page and its live fragment show (to this user: jobs.visibility)."""
    readable = views.Readable(instance, request.user)
    moment = now()
    current = views.current_pods(instance)
    ids = {p.pk for p in current}
    older = sorted((p for p in instance.pods.all() if p.pk not in ids), key=lambda p: -p.pk)
    return {
        "instance": instance,
        "r": row(instance, moment),
        "signals": views.signal_facts(instance, current, moment),
        "pods": readable.pods(current),
        "older_pods": readable.pods(older[:50]),
        "older_count": len(older),
        "older_summary": views.pod_summary(older),
        "status_reason": readable.text(instance.status_reason),
        "events": readable.events(list(instance.events.all())[::-1]),
        "quota_label": views.quota_label(instance.in_quota),
        "waiting": instance.status in WAITING_STATUSES,
        "can_stop": instance.status in ACTIVE_STATUSES,
        "node_pools": ", ".join(np.name for np in instance.node_pools.all()),
        "time_limit": views.age(instance.max_duration) if instance.max_duration else "",
        "open_url": _open_url(instance, current),
    }


class InstanceDetailView(WorkspacePageMixin, TemplateView):
    """One interactive instance: status, quota, GPUs, time left, pods, timeline, Open, Stop."""

    template_name = "jobs/instance_detail.html"
    tab = "instances"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The instance through the user's permissions (404 when not theirs to see)."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        instance = selectors.workload_in_workspace(self.workspace, kwargs["pk"], Kind.INTERACTIVE)
        context.update(_detail_context(self.request, instance))
        return context


class InstanceLiveView(WorkspacePageMixin, View):
    """The instance page's live part, re-fetched by live.js on each of its events."""

    def get(self, request: HttpRequest, workspace: str, pk: int) -> HttpResponse:
        """The fragment alone."""
        instance = selectors.workload_in_workspace(self.workspace, pk, Kind.INTERACTIVE)
        context = self.workspace_context()
        context.update(_detail_context(request, instance))
        return TemplateResponse(request, "jobs/_instance_live.html", context)


class InstanceOpenView(WorkspacePageMixin, TemplateView):
    """The simulated backend's stand-in for an instance's own UI: which pod it would open.

    No simulated pod serves anything, so the Open link lands here, inside the console,
    rather than on an address that does not exist. 404 unless the instance runs.
    """

    template_name = "jobs/instance_open.html"
    tab = "instances"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The running pod and its node, as the user may read them."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        instance = selectors.workload_in_workspace(self.workspace, kwargs["pk"], Kind.INTERACTIVE)
        running = [p for p in views.current_pods(instance) if p.status == PodStatus.RUNNING]
        if instance.status != Status.RUNNING or not running:
            raise Http404(f"{instance.name} is not running.")
        readable = views.Readable(instance, self.request.user)
        context.update(instance=instance, pods=readable.pods(running))
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
        """To the new instance's page, where its Open link appears once it runs."""
        return redirect("jobs:instance_detail", workspace=self.workspace.name, pk=workload.pk)


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
        return redirect("jobs:instance_detail", workspace=workspace, pk=instance.pk)
