"""Figure builders: the traces and values the dashboard shows for known samples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.charts import (
    allocation_figure,
    dashboard_figures,
    pending_figure,
    preemptions_figure,
    share_figure,
)
from dashboard.selectors.usage import Allocation, QuotaSeries, UsageSeries

END = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TIMES = [END - timedelta(minutes=m) for m in (90, 60, 30, 0)]


@pytest.fixture
def series() -> UsageSeries:
    return UsageSeries(
        start=END - timedelta(hours=24),
        end=END,
        bucket=timedelta(minutes=5),
        quotas=[
            QuotaSeries(
                quota_id=1,
                name="Quota 1",
                at=TIMES,
                in_quota=[8.0, 8.0, 64.0, 64.0],
                borrowed=[0.0, 0.0, 0.0, 0.0],
                pending=[0.0, 0.0, 56.0, 0.0],
                preemptions=[0, 0, 0, 0],
            ),
            QuotaSeries(
                quota_id=2,
                name="Quota 1.1",
                at=TIMES,
                in_quota=[48.0, 48.0, 16.0, 16.0],
                borrowed=[40.0, 40.0, 0.0, 0.0],
                pending=[8.0, 8.0, 32.0, 40.0],
                preemptions=[0, 1, 4, 2],
            ),
        ],
    )


def test_allocation_has_in_quota_then_borrowed_trace_per_quota(series) -> None:
    fig = allocation_figure(series)
    assert [t.name for t in fig.data] == [
        "Quota 1 · In Quota",
        "Quota 1.1 · In Quota",
        "Quota 1 · borrowed",
        "Quota 1.1 · borrowed",
    ]
    assert {t.stackgroup for t in fig.data} == {"gpus"}
    assert [t.meta for t in fig.data] == [
        {"quota": 1, "field": "in_quota"},
        {"quota": 2, "field": "in_quota"},
        {"quota": 1, "field": "borrowed"},
        {"quota": 2, "field": "borrowed"},
    ]
    assert list(fig.data[0].y) == [8.0, 8.0, 64.0, 64.0]
    assert list(fig.data[3].y) == [40.0, 40.0, 0.0, 0.0]
    assert fig.data[0].x[-1] == "2026-12-01 09:00:00"
    # Borrowed bands are hatched, In Quota ones solid.
    assert fig.data[2].fillpattern.shape == "/"
    assert fig.data[0].fillpattern.shape is None


def test_allocation_x_range_is_the_24_hours_before_the_newest_sample(series) -> None:
    fig = allocation_figure(series)
    assert tuple(fig.layout.xaxis.range) == ("2026-11-30 09:00:00", "2026-12-01 09:00:00")


def test_allocation_marks_schedulable_capacity(series) -> None:
    fig = allocation_figure(series, capacity=128_000)
    assert fig.layout.shapes[0].y0 == 128
    assert "128" in fig.layout.annotations[0].text


def test_share_is_allocated_over_schedulable_capacity() -> None:
    fig = share_figure(Allocation(allocated=96_000, capacity=128_000))
    gauge = fig.data[0]
    assert gauge.value == 75.0
    assert gauge.title.text == "96 of 128 GPUs allocated"


def test_share_without_capacity_is_zero() -> None:
    assert share_figure(Allocation(allocated=0, capacity=0)).data[0].value == 0


def test_pending_has_one_line_per_quota(series) -> None:
    fig = pending_figure(series)
    assert [t.name for t in fig.data] == ["Quota 1", "Quota 1.1"]
    assert list(fig.data[1].y) == [8.0, 8.0, 32.0, 40.0]
    assert fig.data[1].meta == {"quota": 2, "field": "pending"}


def test_preemptions_are_summed_per_hour(series) -> None:
    fig = preemptions_figure(series)
    # 07:30 → hour 07; 08:00 and 08:30 → hour 08; 09:00 → hour 09.
    assert list(fig.data[1].x) == [
        "2026-12-01 07:00:00",
        "2026-12-01 08:00:00",
        "2026-12-01 09:00:00",
    ]
    assert list(fig.data[1].y) == [0, 5, 2]
    assert list(fig.data[0].y) == [0, 0, 0]
    assert fig.data[0].type == "bar"
    assert fig.layout.barmode == "stack"


def test_no_samples_gives_empty_figures() -> None:
    empty = UsageSeries(start=None, end=None, bucket=timedelta(minutes=5), quotas=[])
    figures = dashboard_figures(empty, Allocation(allocated=0, capacity=0))
    assert figures["allocation"]["data"] == []
    assert figures["preemptions"]["data"] == []
    assert figures["share"]["data"][0]["value"] == 0


def test_dashboard_figures_are_json_ready(series) -> None:
    import json

    figures = dashboard_figures(series, Allocation(allocated=64_000, capacity=128_000))
    assert set(figures) == {"allocation", "share", "pending", "preemptions"}
    assert len(json.loads(json.dumps(figures))["allocation"]["data"]) == 4
