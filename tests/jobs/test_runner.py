"""The embedded runner fires the control-loop tasks on their intervals and wakes on request."""

from __future__ import annotations

import pytest

from console.runner import MIN_REAL_INTERVAL, Runner
from jobs.choices import Status
from jobs.models import ControlState, UsageSample
from jobs.wakeup import on_cycle_requested

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_tick_runs_every_task_once_then_waits_for_their_intervals(submit, bob, sim) -> None:
    job = submit(bob, "ticked")
    runner = Runner(speed=1.0)
    runner.tick()
    job.refresh_from_db()
    assert job.status == Status.RUNNING
    assert ControlState.objects.get(pk=1).cycles == 1
    assert UsageSample.objects.count() == 3  # one per quota
    runner.tick()  # nothing is due yet at 1x speed
    assert ControlState.objects.get(pk=1).cycles == 1
    runner.tick(force_cycle=True)  # a submit or scale forces the cycle
    assert ControlState.objects.get(pk=1).cycles == 2
    assert UsageSample.objects.count() == 3


def test_fast_simulated_time_never_runs_tasks_more_often_than_the_floor() -> None:
    runner = Runner(speed=10_000)
    assert runner.interval("jobs.tasks.scheduling_cycle") == MIN_REAL_INTERVAL
    assert Runner(speed=1).interval("jobs.tasks.usage_sample") == 60


def test_a_requested_cycle_wakes_the_loop(submit, bob, sim) -> None:
    runner = Runner(speed=1.0)
    on_cycle_requested(runner.wake.set)
    submit(bob, "wakes")  # commits, then request_cycle's on_commit fires
    assert runner.wake.is_set()


def test_a_requested_cycle_waits_out_the_floor_after_the_last_cycle(submit, bob, sim) -> None:
    runner = Runner(speed=1.0)
    runner.tick()
    ran = runner.last_run["jobs.tasks.scheduling_cycle"]
    assert runner.forced_cycle_delay(ran) == pytest.approx(MIN_REAL_INTERVAL)
    assert runner.forced_cycle_delay(ran + MIN_REAL_INTERVAL / 4) == pytest.approx(
        MIN_REAL_INTERVAL * 3 / 4
    )
    assert runner.forced_cycle_delay(ran + MIN_REAL_INTERVAL) == 0
    assert Runner(speed=1.0).forced_cycle_delay(ran) == 0  # no cycle yet: at once
