"""Interactive time limits: maximum duration and idle auto-stop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from console.demo import Demo
from jobs.choices import EventKind, PodStatus, Status
from jobs.clock import ManualClock
from jobs.models import Pod, Workload, WorkloadEvent
from jobs.services.limits import interactive_time_limits_enforce

STARTED = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
TWO_HOURS = 2 * 3600


@pytest.fixture
def make_instance(demo: Demo, alice: Any) -> Any:
    def make(name: str = "notebook", **fields: Any) -> Workload:
        values: dict[str, Any] = {
            "kind": "interactive",
            "status": Status.RUNNING,
            "gpu": 1000,
            "replicas": 1,
            "max_duration": TWO_HOURS,
            "submitted_at": STARTED - timedelta(minutes=1),
            "started_at": STARTED,
            **fields,
        }
        instance = Workload.objects.create(
            name=name,
            workspace=demo.workspaces["workspace_a"],
            quota=demo.quotas["Quota 1"],
            owner=alice,
            **values,
        )
        instance.node_pools.set([demo.node_pool])
        Pod.objects.create(workload=instance, index=0, status=PodStatus.RUNNING, created_at=STARTED)
        return instance

    return make


def test_an_instance_is_stopped_at_its_maximum_duration_not_before(make_instance: Any) -> None:
    instance = make_instance()
    clock = ManualClock(STARTED + timedelta(seconds=TWO_HOURS - 1))
    assert interactive_time_limits_enforce(now=clock.now()) == 0
    instance.refresh_from_db()
    assert instance.status == Status.RUNNING

    clock.advance(1)
    assert interactive_time_limits_enforce(now=clock.now()) == 1
    instance.refresh_from_db()
    assert instance.status == Status.STOPPED
    assert instance.status_reason == "Reached its maximum duration of 2 h"
    assert instance.ended_at == STARTED + timedelta(hours=2)
    pod = instance.pods.get()
    assert pod.status == PodStatus.STOPPED
    assert pod.ended_at == STARTED + timedelta(hours=2)
    event = WorkloadEvent.objects.get(workload=instance)
    assert event.kind == EventKind.FINISHED
    assert "maximum duration of 2 h" in event.message


def test_enforcing_again_changes_nothing(make_instance: Any) -> None:
    instance = make_instance()
    later = STARTED + timedelta(hours=3)
    assert interactive_time_limits_enforce(now=later) == 1
    assert interactive_time_limits_enforce(now=later) == 0
    assert interactive_time_limits_enforce(now=later + timedelta(hours=1)) == 0
    instance.refresh_from_db()
    assert instance.ended_at == later
    assert WorkloadEvent.objects.filter(workload=instance).count() == 1


def test_a_queued_instance_that_started_is_stopped_too(make_instance: Any) -> None:
    instance = make_instance(status=Status.QUEUED)
    never_started = make_instance("waiting", status=Status.QUEUED, started_at=None)
    assert interactive_time_limits_enforce(now=STARTED + timedelta(hours=2)) == 1
    instance.refresh_from_db()
    never_started.refresh_from_db()
    assert instance.status == Status.STOPPED
    assert never_started.status == Status.QUEUED


def test_only_interactive_instances_are_limited(make_instance: Any) -> None:
    training = make_instance("train", kind="training")
    assert interactive_time_limits_enforce(now=STARTED + timedelta(days=1)) == 0
    training.refresh_from_db()
    assert training.status == Status.RUNNING


def test_ended_pods_keep_their_status(make_instance: Any) -> None:
    instance = make_instance()
    Pod.objects.create(
        workload=instance,
        index=0,
        attempt=1,
        status=PodStatus.FAILED,
        created_at=STARTED,
        ended_at=STARTED + timedelta(minutes=5),
    )
    interactive_time_limits_enforce(now=STARTED + timedelta(hours=2))
    statuses = sorted(instance.pods.values_list("status", flat=True))
    assert statuses == [PodStatus.FAILED, PodStatus.STOPPED]


def test_an_idle_instance_is_stopped_after_its_idle_minutes(make_instance: Any) -> None:
    instance = make_instance(
        max_duration=8 * 3600,
        idle_stop_minutes=30,
        last_progress_at=STARTED + timedelta(minutes=20),
    )
    assert interactive_time_limits_enforce(now=STARTED + timedelta(minutes=49)) == 0
    assert interactive_time_limits_enforce(now=STARTED + timedelta(minutes=50)) == 1
    instance.refresh_from_db()
    assert instance.status == Status.STOPPED
    assert instance.status_reason == "Idle for 30 minutes"


def test_stopping_asks_for_a_scheduling_cycle(
    make_instance: Any, django_capture_on_commit_callbacks: Any
) -> None:
    make_instance()
    with django_capture_on_commit_callbacks() as callbacks:
        interactive_time_limits_enforce(now=STARTED + timedelta(hours=2))
    assert len(callbacks) == 2  # the event push and the cycle request
    with django_capture_on_commit_callbacks() as callbacks:
        interactive_time_limits_enforce(now=STARTED + timedelta(hours=2))
    assert callbacks == []


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(7200, "2 h"), (5400, "1 h 30 min"), (1800, "30 min"), (90, "90 s")],
    ids=["hours", "hours-and-minutes", "minutes", "seconds"],
)
def test_the_reason_states_the_duration_plainly(
    make_instance: Any, seconds: int, text: str
) -> None:
    instance = make_instance(max_duration=seconds)
    interactive_time_limits_enforce(now=STARTED + timedelta(seconds=seconds))
    instance.refresh_from_db()
    assert instance.status_reason == f"Reached its maximum duration of {text}"
