"""Training job pages: the list, one job, its live fragments, submit and cancel."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views import View
from django.views.generic import TemplateView

from console.confirm import confirm_or_apply
from console.errors import DomainError
from jobs import selectors
from jobs.bridge.room import submit_room
from jobs.choices import Kind, Status
from jobs.filters import DEFAULT_SORT, JobFilter
from jobs.forms import JobSubmitForm
from jobs.models import Workload
from jobs.services.fit import gpus
from jobs.services.workloads import Shape, job_submit, workload_cancel
from jobs.views import (
    Readable,
    SubmitView,
    current_pods,
    effects,
    now,
    pod_summary,
    quota_label,
    row,
    signal_facts,
)
from workspaces.pages import WorkspacePageMixin
from workspaces.roles import SUBMIT

PAGE_SIZE = 50
COLUMNS = (
    ("name", "Name", ""),
    ("owner", "Owner", ""),
    ("gpus", "GPUs", "num"),
    ("priority", "Priority", "num"),
    ("status", "Status", ""),
    ("quota", "Quota status", ""),
    ("restarts", "Restarts", "num"),
    ("progress", "Progress", "num"),
    ("age", "Age", "num"),
)


def job_list_context(
    query: Any, queryset: QuerySet[Workload], filter_class: type[JobFilter] = JobFilter
) -> dict[str, Any]:
    """One count, one page of rows with pods, the pager and the sortable columns, for the
    query string `query`: a fixed number of queries, whatever the row count."""
    found = filter_class(query, queryset)
    paginator = Paginator(found.qs, PAGE_SIZE)
    page = paginator.get_page(query.get("page"))
    start = (page.number - 1) * PAGE_SIZE
    rows = selectors.job_rows(found.qs, start, start + PAGE_SIZE)
    kept = found.given
    sort = kept.pop("sort", DEFAULT_SORT)
    number, pages = page.number, paginator.num_pages
    moment = now()

    def link(**changes: Any) -> str:
        query = {**kept, "sort": sort, **changes}
        return "?" + urlencode({k: v for k, v in query.items() if v not in ("", None)})

    return {
        "rows": [row(w, moment, pods) for w, pods in rows],
        "total": paginator.count,
        "page": number,
        "pages": pages,
        "prev_link": link(page=number - 1) if number > 1 else None,
        "next_link": link(page=number + 1) if number < pages else None,
        "columns": [
            (
                key,
                label,
                css,
                link(sort=f"-{key}" if sort == key else key, page=None),
                "asc" if sort == key else "desc" if sort == f"-{key}" else "",
            )
            for key, label, css in COLUMNS
        ],
        "filters": kept,
        "filter_problems": found.problems,
        "sort": sort,
        "statuses": Status.values,
        "live_default": number == 1 and not kept,
    }


class JobListView(WorkspacePageMixin, TemplateView):
    """The workspace's training jobs: filter by status, owner and quota; sort; 50 a page."""

    template_name = "jobs/job_list.html"
    tab = "jobs"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """One count, one page of rows with pods, the owners: a fixed number of queries."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        queryset = selectors.workspace_workloads(self.workspace, Kind.TRAINING)
        context.update(job_list_context(self.request.GET, queryset))
        context["owners"] = selectors.workload_owners(self.workspace, Kind.TRAINING)
        return context


class JobRowView(WorkspacePageMixin, View):
    """One list row, re-fetched by live.js when an event arrives for the job."""

    def get(self, request: HttpRequest, workspace: str, pk: int) -> HttpResponse:
        """The <tr> alone."""
        selectors.workload_in_workspace(self.workspace, pk, Kind.TRAINING)
        job = selectors.workload_page(Workload.objects.filter(pk=pk)).get()
        return TemplateResponse(
            request,
            "jobs/_job_row.html",
            {"r": row(job, now()), "workspace": self.workspace},
        )


def _detail_context(request: HttpRequest, job: Workload) -> dict[str, Any]:
    """What the job page and its live fragment show (to this user: jobs.visibility)."""
    readable = Readable(job, request.user)
    moment = now()
    current = current_pods(job)
    ids = {p.pk for p in current}
    older = sorted((p for p in job.pods.all() if p.pk not in ids), key=lambda p: -p.pk)
    return {
        "job": job,
        "r": row(job, moment),
        "signals": signal_facts(job, current, moment),
        "pods": readable.pods(current),
        "older_pods": readable.pods(older[:50]),
        "older_count": len(older),
        "older_summary": pod_summary(older),
        "status_reason": readable.text(job.status_reason),
        "events": readable.events(list(job.events.all())[::-1]),
        "quota_label": quota_label(job.in_quota, job.status),
        "waiting": job.status in (Status.QUEUED, Status.REQUEUED),
        "can_cancel": job.status in (Status.QUEUED, Status.RUNNING, Status.REQUEUED),
        "node_pools": ", ".join(np.name for np in job.node_pools.all()),
    }


class JobDetailView(WorkspacePageMixin, TemplateView):
    """One training job: pods, timeline, why it waits, Cancel."""

    template_name = "jobs/job_detail.html"
    tab = "jobs"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The job through the user's permissions (404 when not theirs to see)."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        job = selectors.workload_in_workspace(self.workspace, kwargs["pk"], Kind.TRAINING)
        context.update(_detail_context(self.request, job))
        return context


class JobLiveView(WorkspacePageMixin, View):
    """The job page's live part (status, pods, timeline), re-fetched on each of its events."""

    def get(self, request: HttpRequest, workspace: str, pk: int) -> HttpResponse:
        """The fragment alone."""
        job = selectors.workload_in_workspace(self.workspace, pk, Kind.TRAINING)
        context = self.workspace_context()
        context.update(_detail_context(request, job))
        return TemplateResponse(request, "jobs/_job_live.html", context)


class JobCancelView(WorkspacePageMixin, View):
    """Cancel a job (POST; submit permission), once confirmed (console.confirm)."""

    tab = "jobs"  # the confirmation page sits under this tab
    permission = SUBMIT

    def post(self, request: HttpRequest, workspace: str, pk: int) -> HttpResponse:
        """Confirm first (what stops, what is lost); cancel through the service, then back."""
        job = selectors.workload_in_workspace(self.workspace, pk, Kind.TRAINING)
        confirmation = effects.job_cancel(
            job, workspace=workspace, now=now(), chrome=self.workspace_context()
        )
        if page := confirm_or_apply(request, confirmation):
            return page
        try:
            workload_cancel(actor=request.user, workload=job)
        except DomainError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Cancelled {job.name}.")
        return redirect("jobs:job_detail", workspace=self.workspace.name, pk=job.pk)


class JobSubmitView(SubmitView):
    """Submit a training job into one of the quotas the user's rules allow."""

    template_name = "jobs/job_submit.html"
    form_class = JobSubmitForm
    tab = "jobs"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The form, and the room each usable quota has now: free In Quota, idle to borrow."""
        context = super().get_context_data(**kwargs)
        usable = [u.quota for u in self.access.usable_quotas(self.workspace)]
        room = submit_room(usable, now=now())
        context["room"] = [
            (
                q,
                [
                    (
                        r.pool,
                        gpus(r.free_in_quota),
                        gpus(r.idle),
                        "no max" if r.limit_left is None else gpus(max(r.limit_left, 0)),
                    )
                    for r in room.get(q.pk, [])
                ],
            )
            for q in usable
        ]
        return context

    def create(self, form: JobSubmitForm) -> Workload:
        """job_submit."""
        return job_submit(
            actor=self.request.user,
            access=self.access,
            workspace=self.workspace,
            shape=Shape(**form.shape_values()),
            **form.job_values(),
        )

    def done(self, workload: Workload) -> HttpResponse:
        """Back to the jobs list."""
        return redirect("jobs:job_list", workspace=self.workspace.name)
