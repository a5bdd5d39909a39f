"""The platform admin's cluster dashboard: usage charts that extend live from /ws/cluster/."""

from __future__ import annotations

from typing import Any

from django.views.generic import TemplateView

from console.permissions import PlatformAdminRequiredMixin
from jobs.usage_selectors import BUCKET, WINDOW, allocation_now, usage_series
from quotas.charts import dashboard_figures, plot_time


class ClusterDashboardView(PlatformAdminRequiredMixin, TemplateView):
    """GPU allocation In Quota vs borrowed, share allocated now, pending, preemptions."""

    template_name = "dashboard/cluster.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The figures and the live feed's settings (6 queries whatever the data size)."""
        context = super().get_context_data(**kwargs)
        series = usage_series()
        allocation = allocation_now()
        context["figures"] = dashboard_figures(series, allocation)
        context["series"] = series
        context["allocation"] = allocation
        context["bucket_minutes"] = int(BUCKET.total_seconds() // 60)
        context["live"] = {
            "path": "/ws/cluster/",
            "window_ms": int(WINDOW.total_seconds() * 1000),
            "bucket_ms": int(BUCKET.total_seconds() * 1000),
            "end": plot_time(series.end) if series.end else None,
        }
        return context
