"""What if… pages for platform admins: the list, a new replay, a result, two side by side."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.generic import FormView, TemplateView

from console import clock
from console.errors import DomainError
from console.permissions import PlatformAdminRequiredMixin
from whatif.changes import ChangeError, describe, validate_changes
from whatif.charts import result_figures
from whatif.choices import RunStatus, Window
from whatif.forms import WhatIfForm
from whatif.models import WhatIf
from whatif.selectors import whatif_list
from whatif.services import whatif_create

LIST_LIMIT = 50
# The result table's rows: (label, key in a quota's figures, how to show it)
METRICS = (
    ("GPU-hours allocated", "gpu_hours"),
    ("GPU-hours In Quota", "in_quota_gpu_hours"),
    ("GPU-hours borrowed", "borrowed_gpu_hours"),
    ("Wait, median (min)", "wait_median_min"),
    ("Wait, p95 (min)", "wait_p95_min"),
    ("Never started", "never_started"),
    ("Preemptions", "preemptions"),
    ("GPU-hours of work lost", "lost_gpu_hours"),
)


def _show(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "0"
    return str(value)


def quota_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per quota, each metric as (label, baseline, proposal) shown in words."""
    rows = []
    finishing = result.get("finishing", {})
    for quota, runs in result.get("quotas", {}).items():
        metrics = [
            (label, _show(runs["baseline"][key]), _show(runs["proposal"][key]))
            for label, key in METRICS
        ]
        moved = finishing.get(quota, {"later": 0, "earlier": 0})
        metrics.append(
            ("Jobs finishing later / earlier", "", f"{moved['later']} / {moved['earlier']}")
        )
        rows.append({"quota": quota, "metrics": metrics})
    return rows


class WhatIfListView(PlatformAdminRequiredMixin, TemplateView):
    """Every replay, newest first, with a form to compare two."""

    template_name = "whatif/list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The newest replays."""
        runs = list(whatif_list()[:LIST_LIMIT])
        for run in runs:
            run.described = [describe(c) for c in run.changes]  # type: ignore[attr-defined]
        return {**super().get_context_data(**kwargs), "runs": runs}


class WhatIfCreateView(PlatformAdminRequiredMixin, FormView):  # type: ignore[type-arg]
    """A new replay; GET ?window=7d&changes=<JSON list> prefills it (the quota pages link so)."""

    template_name = "whatif/new.html"
    form_class = WhatIfForm

    def get_initial(self) -> dict[str, Any]:
        """The window and changes of the link that led here."""
        initial: dict[str, Any] = {"window": Window.WEEK}
        window = self.request.GET.get("window")
        if window in Window.values:
            initial["window"] = window
        raw = self.request.GET.get("changes")
        if raw:
            try:
                initial["changes"] = json.dumps(json.loads(raw), indent=2)
            except ValueError:
                initial["changes"] = raw
        return initial

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The prefilled changes in words, when they read as changes."""
        context = super().get_context_data(**kwargs)
        raw = context["form"]["changes"].value()
        try:
            context["described"] = [describe(c) for c in validate_changes(raw or "")]
        except ChangeError:
            context["described"] = []
        return context

    def form_valid(self, form: WhatIfForm) -> HttpResponse:
        """Queue the replay and open its page; a refused field shows on the form."""
        data = form.cleaned_data
        try:
            run = whatif_create(
                actor=self.request.user,
                window=data["window"],
                changes=data["changes"],
                start=data["start"],
                end=data["end"],
                now=clock.now(),
            )
        except DomainError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            return self.form_invalid(form)
        return redirect("whatif:detail", run.pk)


class WhatIfDetailView(PlatformAdminRequiredMixin, TemplateView):
    """One replay: its progress while it runs, its result and fidelity once done."""

    template_name = "whatif/detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The replay, its figures and its rows."""
        run = get_object_or_404(WhatIf.objects.select_related("created_by"), pk=kwargs["pk"])
        context = super().get_context_data(**kwargs)
        context |= {
            "run": run,
            "described": [describe(c) for c in run.changes],
            "busy": run.status in (RunStatus.QUEUED, RunStatus.RUNNING),
            "percent": round(100 * run.progress),
        }
        if run.status == RunStatus.DONE and run.result:
            context |= {
                "result": run.result,
                "rows": quota_rows(run.result),
                "figures": result_figures(run.result),
            }
        return context


class WhatIfCompareView(PlatformAdminRequiredMixin, TemplateView):
    """Two finished replays side by side: their changes, cluster figures and per-quota proposals."""

    template_name = "whatif/compare.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Each replay with its changes in words and its per-quota rows."""
        sides = []
        for key in ("a", "b"):
            value = self.request.GET.get(key, "")
            run = get_object_or_404(WhatIf, pk=int(value) if value.isdigit() else 0)
            sides.append(
                {
                    "run": run,
                    "described": [describe(c) for c in run.changes],
                    "rows": quota_rows(run.result) if run.result else [],
                }
            )
        return {**super().get_context_data(**kwargs), "sides": sides}
