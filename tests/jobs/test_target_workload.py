"""The target workload placement expects is learned from the cluster's latest submissions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from console.clock import ManualClock
from jobs.bridge import snapshot as bridge
from jobs.bridge.snapshot import build, learned_target


def _gpus(target: tuple[Any, ...]) -> dict[int, float]:
    """Popularity per GPU count of whole-GPU shapes."""
    out: dict[int, float] = {}
    for s in target:
        out[s.count] = out.get(s.count, 0.0) + s.p
    return out


@pytest.mark.django_db
def test_an_empty_cluster_has_no_learned_target(clock: ManualClock) -> None:
    # the core then places with fragmentation.DEFAULT_TARGET
    assert learned_target(clock.now()) == ()


@pytest.mark.django_db
def test_the_target_follows_the_submissions(
    bob: Any, submit: Callable[..., Any], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.advance(8 * 86400)  # the demo's own submissions are out of the window
    for i in range(6):
        submit(bob, f"small-{i}", gpus=1)
    clock.advance(bridge.TARGET_REFRESH)  # learned again
    first = learned_target(clock.now())
    assert _gpus(first) == {1: pytest.approx(1.0)}
    assert build(clock.now()).snapshot.target == first
    # a week later only 8-GPU jobs were submitted: the 1-GPU ones left the window
    clock.advance(8 * 86400)
    for i in range(3):
        submit(bob, f"big-{i}", gpus=8)
    clock.advance(bridge.TARGET_REFRESH)
    assert _gpus(learned_target(clock.now())) == {8: pytest.approx(1.0)}
    # within the days, the window also ends at a number of workloads (the latest ones)
    clock.advance(60)
    for i in range(2):
        submit(bob, f"small-again-{i}", gpus=1, replicas=3)
    clock.advance(bridge.TARGET_REFRESH)
    monkeypatch.setattr(bridge, "TARGET_WORKLOADS", 3)
    mixed = _gpus(learned_target(clock.now()))
    # the last 3 workloads: two 1-GPU jobs of 3 replicas each, one 8-GPU job, which weighs
    # 1/8 of a task per device it takes
    assert mixed == {1: pytest.approx(6 / 6.125), 8: pytest.approx(0.125 / 6.125)}


@pytest.mark.django_db
def test_the_target_holds_between_refreshes(
    bob: Any, submit: Callable[..., Any], clock: ManualClock
) -> None:
    clock.advance(8 * 86400)
    at = clock.now().timestamp()
    clock.advance(bridge.TARGET_REFRESH - at % bridge.TARGET_REFRESH + 1)  # just past one
    submit(bob, "small", gpus=1)
    assert learned_target(clock.now()) == ()  # submitted since the last refresh
    clock.advance(bridge.TARGET_REFRESH - 2)
    assert learned_target(clock.now()) == ()
    clock.advance(1)  # the next refresh
    small = learned_target(clock.now())
    assert _gpus(small) == {1: pytest.approx(1.0)}
    # an 8-GPU job submitted now changes neither the target nor the snapshot's until the next
    submit(bob, "big", gpus=8)
    clock.advance(bridge.TARGET_REFRESH - 1)
    assert learned_target(clock.now()) == small
    assert build(clock.now()).snapshot.target == small
    clock.advance(1)
    assert _gpus(learned_target(clock.now())) == {
        1: pytest.approx(1 / 1.125),
        8: pytest.approx(0.125 / 1.125),
    }


@pytest.mark.django_db
def test_the_snapshot_places_as_the_setting_says(clock: ManualClock, settings: Any) -> None:
    assert build(clock.now()).snapshot.placement == "fgd"  # the default
    settings.TIDEPOOL_PLACEMENT = "bestfit"
    assert build(clock.now()).snapshot.placement == "bestfit"
