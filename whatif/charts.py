"""Plotly figures of a what-if result; views only serialise them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import plotly.graph_objects as go

from dashboard.charts import AXIS, BASE_LAYOUT, PALETTE, plot_time


def allocation_figure(result: dict[str, Any]) -> go.Figure:
    """GPUs allocated per quota, hourly: the baseline solid, the proposal dashed."""
    series = result.get("series", {})
    at = [plot_time(datetime.fromisoformat(h)) for h in series.get("hours", [])]
    traces = []
    for i, (quota, runs) in enumerate(series.get("quotas", {}).items()):
        colour = PALETTE[i % len(PALETTE)][0]
        for run, dash in (("baseline", "solid"), ("proposal", "dash")):
            traces.append(
                go.Scatter(
                    x=at,
                    y=runs[run],
                    name=f"{quota} · {run}",
                    mode="lines",
                    line={"color": colour, "dash": dash, "width": 2},
                    legendgroup=quota,
                )
            )
    layout = {
        **BASE_LAYOUT,
        "title": {
            "text": "GPUs allocated per quota, hourly: baseline against proposal (UTC)",
            "x": 0,
            "xanchor": "left",
            "font": {"size": 15},
        },
        "xaxis": {"type": "date", "showgrid": True, **AXIS},
        "yaxis": {"title": {"text": "GPUs"}, "rangemode": "tozero", **AXIS},
        "legend": {"orientation": "h", "y": -0.2},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
        "height": 380,
    }
    return go.Figure(data=traces, layout=layout)


def result_figures(result: dict[str, Any]) -> dict[str, Any]:
    """The result page's figures as JSON-ready dicts, keyed by element."""
    return {"allocation": allocation_figure(result).to_plotly_json()}
