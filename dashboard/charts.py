"""Plotly figure builders for the platform admin's dashboard; views only serialise them.

Every trace that the browser extends live carries `meta = {"quota": id, "field": name}`, so
static/js/dashboard.js can map a websocket "sample" payload onto the right traces without
knowing how the figure was laid out.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

if TYPE_CHECKING:
    from dashboard.selectors.usage import Allocation, UsageSeries

MILLI = 1000
# One hue per quota; In Quota is the solid shade, borrowed the light hatched one.
PALETTE = [
    ("#1565c0", "rgba(21,101,192,0.30)"),
    ("#2e7d32", "rgba(46,125,50,0.30)"),
    ("#ef6c00", "rgba(239,108,0,0.30)"),
    ("#6a1b9a", "rgba(106,27,154,0.30)"),
    ("#00838f", "rgba(0,131,143,0.30)"),
    ("#ad1457", "rgba(173,20,87,0.30)"),
    ("#5d4037", "rgba(93,64,55,0.30)"),
    ("#455a64", "rgba(69,90,100,0.30)"),
]
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}
# The "none" template plus a few explicit colours: plotly.py deep-copies a named template into
# every figure, which for plotly_white cost more than building the traces.
GRID = "#eaecf0"
BASE_LAYOUT: dict[str, Any] = {
    "template": "none",
    "font": FONT,
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#ffffff",
}
AXIS = {"gridcolor": GRID, "zeroline": False, "linecolor": "#d0d5dd", "automargin": True}


def plot_time(at: datetime) -> str:
    """A UTC time as plotly.js reads dates: naive "YYYY-MM-DD HH:MM:SS" (no offset support)."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _colours(index: int) -> tuple[str, str]:
    return PALETTE[index % len(PALETTE)]


def _time_layout(series: UsageSeries, *, title: str, y_title: str) -> dict[str, Any]:
    """The layout the time-series charts share: a 24-hour date axis ending at the newest sample."""
    xaxis: dict[str, Any] = {"type": "date", "showgrid": True, **AXIS}
    if series.start is not None and series.end is not None:
        xaxis["range"] = [plot_time(series.start), plot_time(series.end)]
    return {
        **BASE_LAYOUT,
        "title": {"text": f"{title} (UTC)", "x": 0, "xanchor": "left", "font": {"size": 15}},
        "height": 360,
        "margin": {"l": 56, "r": 16, "t": 48, "b": 40},
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.22, "x": 0},
        "xaxis": xaxis,
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero", **AXIS},
    }


def allocation_figure(series: UsageSeries, *, capacity: int | None = None) -> go.Figure:
    """GPUs allocated over time, stacked: every quota's In Quota at the bottom, borrowed above.

    One trace per quota × {In Quota, borrowed}, in that order, so the line between the solid
    and the hatched bands is the cluster's guaranteed usage. `capacity` is milli-GPU.
    """
    traces: list[go.Scatter] = []
    xs = [[plot_time(at) for at in quota.at] for quota in series.quotas]
    for field, label in (("in_quota", "In Quota"), ("borrowed", "borrowed")):
        for index, quota in enumerate(series.quotas):
            traces.append(
                _band(
                    xs[index],
                    quota,
                    field,
                    name=f"{quota.name} · {label}",
                    colours=_colours(index),
                    legendgroup=quota.name,
                )
            )
    layout = _time_layout(series, title="GPU allocation, last 24 hours", y_title="GPUs")
    if capacity:
        _level(layout, capacity / MILLI, "schedulable capacity", "#b42318")
    return go.Figure(data=traces, layout=layout)


def _band(
    x: Any,
    quota: Any,
    field: str,
    *,
    name: str,
    colours: tuple[str, str],
    legendgroup: str | None = None,
) -> go.Scatter:
    """One stacked band of an allocation chart: In Quota solid, borrowed hatched."""
    solid, light = colours
    borrowed = field == "borrowed"
    return go.Scatter(
        x=x,
        y=getattr(quota, field),
        name=name,
        legendgroup=legendgroup,
        stackgroup="gpus",
        mode="lines",
        line={"width": 0.6, "color": solid},
        fillcolor=light if borrowed else solid,
        fillpattern={"shape": "/", "fgcolor": solid, "size": 6, "solidity": 0.25}
        if borrowed
        else None,
        hovertemplate="%{y:.1f} GPUs",
        meta={"quota": quota.quota_id, "field": field},
    )


def _level(layout: dict[str, Any], gpus: float, text: str, colour: str) -> None:
    """A dashed horizontal line across the chart, labelled at its right end."""
    layout["shapes"] = [
        {
            "type": "line",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "y0": gpus,
            "y1": gpus,
            "line": {"color": colour, "width": 1.5, "dash": "dash"},
        }
    ]
    layout["annotations"] = [
        {
            "xref": "paper",
            "x": 1,
            "y": gpus,
            "xanchor": "right",
            "yanchor": "bottom",
            "text": f"{text} {gpus:g}",
            "showarrow": False,
            "font": {"color": colour, "size": 11},
        }
    ]


def share_figure(allocation: Allocation) -> go.Figure:
    """A gauge of the share of schedulable GPUs that live pods hold now."""
    allocated, capacity = allocation.allocated / MILLI, allocation.capacity / MILLI
    return go.Figure(
        go.Indicator(
            mode="gauge+number",
            value=round(allocation.share * 100, 1),
            number={"suffix": "%", "valueformat": ".1f"},
            title={"text": f"{allocated:g} of {capacity:g} GPUs allocated"},
            gauge={
                "axis": {"range": [0, 100], "ticksuffix": "%"},
                "bar": {"color": "#1565c0"},
                "steps": [{"range": [0, 100], "color": "#eef4ff"}],
            },
            meta={"field": "share"},
        ),
        layout={
            **BASE_LAYOUT,
            "height": 360,
            "margin": {"l": 48, "r": 48, "t": 72, "b": 16},
            "title": {"text": "Allocated now", "x": 0, "xanchor": "left", "font": {"size": 15}},
        },
    )


def pending_figure(series: UsageSeries) -> go.Figure:
    """GPUs requested by queued and requeued workloads, one line per quota."""
    traces = [
        go.Scatter(
            x=[plot_time(at) for at in quota.at],
            y=quota.pending,
            name=quota.name,
            mode="lines",
            line={"width": 1.8, "color": _colours(index)[0], "shape": "hv"},
            hovertemplate="%{y:.1f} GPUs",
            meta={"quota": quota.quota_id, "field": "pending"},
        )
        for index, quota in enumerate(series.quotas)
    ]
    layout = _time_layout(series, title="Pending GPUs", y_title="GPUs waiting")
    return go.Figure(data=traces, layout=layout)


def hour_key(at: datetime) -> str:
    """The plotly date of the start of `at`'s hour, in UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:00:00")


def preemptions_figure(series: UsageSeries) -> go.Figure:
    """Preemptions per hour, stacked bars per quota (the victims' quotas)."""
    hours = sorted({hour_key(at) for quota in series.quotas for at in quota.at})
    traces = []
    for index, quota in enumerate(series.quotas):
        per_hour: dict[str, int] = defaultdict(int)
        for at, count in zip(quota.at, quota.preemptions, strict=True):
            per_hour[hour_key(at)] += count
        traces.append(
            go.Bar(
                x=hours,
                y=[per_hour.get(hour, 0) for hour in hours],
                name=quota.name,
                marker={"color": _colours(index)[0]},
                # Each bar spans its hour rather than centring on its start.
                xperiod=3_600_000,
                xperiodalignment="middle",
                hovertemplate="%{y} preemptions",
                meta={"quota": quota.quota_id, "field": "preemptions"},
            )
        )
    layout = _time_layout(series, title="Preemptions per hour", y_title="Preemptions")
    layout["barmode"] = "stack"
    layout["bargap"] = 0.15
    layout["xaxis"].pop("range", None)
    return go.Figure(data=traces, layout=layout)


def dashboard_figures(series: UsageSeries, allocation: Allocation) -> dict[str, dict[str, Any]]:
    """Every dashboard figure as plain JSON-ready dicts, keyed by the element they go into."""
    figures = {
        "allocation": allocation_figure(series, capacity=allocation.capacity),
        "share": share_figure(allocation),
        "pending": pending_figure(series),
        "preemptions": preemptions_figure(series),
    }
    return {key: figure.to_plotly_json() for key, figure in figures.items()}


def quota_allocation_figure(series: UsageSeries, *, guaranteed: int | None = None) -> go.Figure:
    """One quota's GPUs over time: In Quota below, borrowed stacked above, its min as a line.

    `series` holds the one quota (dashboard.selectors.usage.quota_usage_series); `guaranteed` is
    its min in milli-GPU over its node pools.
    """
    traces = []
    for quota in series.quotas:
        at = [plot_time(t) for t in quota.at]
        for field, label in (("in_quota", "In Quota"), ("borrowed", "borrowed")):
            traces.append(_band(at, quota, field, name=label, colours=_colours(0)))
    name = series.quotas[0].name if series.quotas else "Quota"
    layout = _time_layout(series, title=f"{name}: GPU allocation, last 24 hours", y_title="GPUs")
    if guaranteed:
        _level(layout, guaranteed / MILLI, "guaranteed", "#067647")
    return go.Figure(data=traces, layout=layout)


def quota_figures(series: UsageSeries, *, guaranteed: int | None = None) -> dict[str, Any]:
    """The quota Monitoring tab's figures as JSON-ready dicts, keyed by element."""
    return {
        "allocation": quota_allocation_figure(series, guaranteed=guaranteed).to_plotly_json(),
        "pending": pending_figure(series).to_plotly_json(),
    }
