"""All jobs: every workspace's training jobs, finished included, for platform admins."""

from __future__ import annotations

from typing import Any

from django.views.generic import TemplateView

from console.permissions import PlatformAdminRequiredMixin
from jobs import selectors
from jobs.choices import Kind
from jobs.filters import AllJobFilter
from jobs.models import Workload
from jobs.views.jobs import job_list_context
from workspaces.access import Access


class AllJobsView(PlatformAdminRequiredMixin, TemplateView):
    """Filter by workspace, quota, status, quota status and owner; search the name; sort;
    50 a page. Anonymous users go to login; everyone but platform admins gets 404."""

    template_name = "jobs/all_jobs.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """One count, one page of rows with pods, the filters' choices: fixed queries."""
        context = super().get_context_data(**kwargs)
        # The one access rule: a platform admin sees every workspace (restrict adds nothing).
        jobs = Access(self.request.user).restrict(
            Workload.objects.filter(kind=Kind.TRAINING), "workspace"
        )
        context.update(job_list_context(self.request.GET, jobs, AllJobFilter))
        context.update(selectors.training_choices())
        context["all_jobs"] = True
        return context
