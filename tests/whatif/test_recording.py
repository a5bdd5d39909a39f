"""Reading a window: the tree as it was at its start, and its recorded changes replayed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from console import clock as clock_module
from console.clock import ManualClock
from jobs.scheduling.types import Resources
from quotas.services.quotas import quota_rebalance
from whatif.recording import record_window
from whatif.replay.apply import apply_tree, baseline

T0 = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


@pytest.fixture
def manual() -> Any:
    """A manual clock at T0, restored afterwards."""
    clock = ManualClock(T0)
    previous = clock_module.set_clock(clock)
    yield clock
    clock_module.set_clock(previous)


@pytest.mark.django_db
def test_a_rebalance_during_the_window_replays_at_its_time(
    demo: Any, admin: Any, manual: Any
) -> None:
    manual.advance(3600)
    quotas = demo.quotas
    quota_rebalance(
        actor=admin,
        source=quotas["Quota 1.2"],
        target=quotas["Quota 1.1"],
        node_pool=demo.node_pool,
        gpu=8000,
    )
    manual.advance(3600)
    rec = record_window(T0, T0 + timedelta(hours=2))
    at_start = {q.name: q.min["A100-80G"] for q in rec.quotas}
    # the tree as it was before the rebalance, not as it is now
    assert at_start["Quota 1.1"] == Resources(48_000, 0, 0)
    assert at_start["Quota 1.2"].gpu == 80_000
    # one entry per quota: each of the two audit records gives its own quota's state
    assert sorted(c.change["quota"] for c in rec.history) == ["Quota 1.1", "Quota 1.2"]
    assert {c.at for c in rec.history} == {(T0 + timedelta(hours=1)).timestamp()}
    after = rec.quotas
    for c in baseline(rec).timed:
        after = apply_tree(after, c.change, rec.nodes)
    assert {q.name: q.min["A100-80G"].gpu for q in after}["Quota 1.1"] == 56_000
