"""The platform admin's cluster dashboard (usage charts that extend live from /ws/cluster/) and
the node grid (every GPU device coloured by use)."""

from __future__ import annotations

from typing import Any

from django.utils.safestring import mark_safe
from django.views.generic import TemplateView

from cluster.models import NodePool
from console import clock
from console.numbers import is_digits
from console.permissions import PlatformAdminRequiredMixin
from dashboard.charts import dashboard_figures, plot_time
from dashboard.selectors.usage import (
    BORROWED,
    BUCKET,
    FREE,
    FULL,
    SHARED,
    WINDOW,
    allocation_now,
    node_grid,
    usage_series,
)
from jobs.bridge.placement_target import placement_target, shape_label


class ClusterDashboardView(PlatformAdminRequiredMixin, TemplateView):
    """GPU allocation In Quota vs borrowed, share allocated now, pending, preemptions."""

    template_name = "dashboard/cluster.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The figures, the live feed's settings, the placement target and the fragmentation
        per node pool (9 queries whatever the data size)."""
        context = super().get_context_data(**kwargs)
        series = usage_series()
        allocation = allocation_now()
        context["figures"] = dashboard_figures(series, allocation)
        context["series"] = series
        context["allocation"] = allocation
        target = placement_target(clock.now())
        context["target"] = target
        context["target_shapes"] = [(shape_label(s), _percent(s.p)) for s in target.shapes]
        context["bucket_minutes"] = int(BUCKET.total_seconds() // 60)
        context["live"] = {
            "path": "/ws/cluster/",
            "window_ms": int(WINDOW.total_seconds() * 1000),
            "bucket_ms": int(BUCKET.total_seconds() * 1000),
            "end": plot_time(series.end) if series.end else None,
        }
        return context


def _percent(p: float) -> str:
    """A share of the target in whole percent, or to a tenth below 1% (not shown as 0)."""
    return f"{100 * p:.0f}" if p >= 0.01 else f"{100 * p:.1f}"


class NodeGridView(PlatformAdminRequiredMixin, TemplateView):
    """Every GPU device as one cell coloured by use, to show fragmentation (4 queries)."""

    template_name = "nodes/grid.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The grid for all pools or for ?pool=<id>, grouped by node pool."""
        context = super().get_context_data(**kwargs)
        pools = list(NodePool.objects.order_by("name").values_list("pk", "name"))
        selected = self.request.GET.get("pool", "")
        pool_id = int(selected) if is_digits(selected) else None
        grid = node_grid(node_pool_id=pool_id)
        # Cells are joined here rather than in a template loop: 6,000 iterations of the
        # template engine cost more than the rest of the page. Classes come from a fixed set.
        cell = {state: f'<i class="{state}"></i>' for state in (FREE, FULL, SHARED, BORROWED)}
        groups: dict[str, list[Any]] = {}
        for node in grid.nodes:
            cells = mark_safe("".join(cell[state] for state in node.cells))
            groups.setdefault(node.pool, []).append((node, cells))
        context.update(
            grid=grid,
            groups=groups,
            pools=pools,
            pool_id=pool_id,
            # Names fit under each node on small clusters; on openb-sized ones the title does.
            show_names=len(grid.nodes) <= 120,
            legend=[
                (FREE, "Free"),
                (FULL, "Full (In Quota)"),
                (SHARED, "Partly used by shared fractional pods"),
                (BORROWED, "Borrowed (Not in Quota)"),
            ],
        )
        return context
