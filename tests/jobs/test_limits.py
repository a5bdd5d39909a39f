"""Interactive time limits: maximum duration and idle auto-stop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from console.clock import ManualClock
from console.demo import Demo
from jobs.choices import EventKind, PodStatus, Status
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
        last_activity_at=STARTED + timedelta(minutes=20),  # its last activity report
    )
    assert interactive_time_limits_enforce(now=STARTED + timedelta(minutes=49)) == 0
    assert interactive_time_limits_enforce(now=STARTED + timedelta(minutes=50)) == 1
    instance.refresh_from_db()
    assert instance.status == Status.STOPPED
    assert instance.status_reason == "Idle for 30 minutes"


def test_an_instance_never_active_is_idle_from_its_start(make_instance: Any) -> None:
    instance = make_instance(max_duration=8 * 3600, idle_stop_minutes=30)
    assert interactive_time_limits_enforce(now=STARTED + timedelta(minutes=29)) == 0
    assert interactive_time_limits_enforce(now=STARTED + timedelta(minutes=30)) == 1
    instance.refresh_from_db()
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


# Workspace limits: the default, the cap, and a cap lowered under running instances ------------

HOUR = 3600


def _set_limits(demo: Demo, admin: Any, **limits: int | None) -> None:
    from workspaces.services import workspace_instance_limits_set

    workspace_instance_limits_set(
        actor=admin, workspace=demo.workspaces["workspace_a"], now=STARTED, **limits
    )


def _start(demo: Demo, alice: Any, **kwargs: Any) -> Workload:
    from jobs.services.workloads import Shape, instance_start

    return instance_start(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name=kwargs.pop("name", "notebook"),
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        now=STARTED,
        **kwargs,
    )


def test_an_instance_that_asks_for_no_duration_gets_the_workspace_default(
    demo: Demo, admin: Any, alice: Any
) -> None:
    _set_limits(demo, admin, default_duration=2 * HOUR, max_duration=8 * HOUR)
    assert _start(demo, alice).max_duration == 2 * HOUR
    assert _start(demo, alice, name="longer", max_duration=6 * HOUR).max_duration == 6 * HOUR


def test_without_a_default_an_instance_must_give_its_duration(demo: Demo, alice: Any) -> None:
    from console.errors import DomainError

    with pytest.raises(DomainError) as refused:
        _start(demo, alice)
    assert refused.value.field == "max_duration"
    assert refused.value.message == (
        "Give a maximum duration: workspace_a sets no default for interactive instances."
    )
    assert not Workload.objects.exists()


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        (87600 * HOUR, "workspace_a caps interactive instances at 8 h; this asks for 87600 h."),
        (8 * HOUR + 60, "workspace_a caps interactive instances at 8 h; this asks for 8 h 1 min."),
        (59, "Maximum duration must be at least 60 s, not 59."),
    ],
    ids=["ten-years", "a-minute-over", "under-a-minute"],
)
def test_a_duration_past_the_cap_or_under_a_minute_is_refused_naming_both_numbers(
    demo: Demo, admin: Any, alice: Any, asked: int, message: str
) -> None:
    from console.errors import DomainError

    _set_limits(demo, admin, max_duration=8 * HOUR)
    with pytest.raises(DomainError) as refused:
        _start(demo, alice, max_duration=asked)
    assert (refused.value.field, refused.value.message) == ("max_duration", message)
    assert not Workload.objects.exists()
    assert _start(demo, alice, max_duration=8 * HOUR).max_duration == 8 * HOUR


def test_a_lowered_cap_shortens_a_running_instance_and_the_task_stops_it_once_past(
    demo: Demo, admin: Any, alice: Any, make_instance: Any
) -> None:
    """A 10-year notebook started at 09:00; at 18:00 the admin caps the workspace at 8 h."""
    notebook = make_instance(max_duration=87600 * HOUR)
    fresh = make_instance(
        "fresh", max_duration=87600 * HOUR, started_at=STARTED + timedelta(hours=8)
    )
    evening = STARTED + timedelta(hours=9)
    _set_limits(demo, admin, max_duration=8 * HOUR)
    # nothing stops inside the admin's request: the task does, on its next tick
    notebook.refresh_from_db()
    assert (notebook.status, notebook.max_duration) == (Status.RUNNING, 8 * HOUR)
    assert interactive_time_limits_enforce(now=evening) == 1
    notebook.refresh_from_db()
    fresh.refresh_from_db()
    assert notebook.status == Status.STOPPED
    assert notebook.status_reason == "Reached its maximum duration of 8 h"
    assert notebook.pods.get().status == PodStatus.STOPPED
    kinds = list(WorkloadEvent.objects.filter(workload=notebook).values_list("kind", flat=True))
    assert kinds == [EventKind.LIMIT, EventKind.FINISHED]
    # the one started an hour ago keeps running until 8 h after its own start
    assert (fresh.status, fresh.max_duration) == (Status.RUNNING, 8 * HOUR)
    assert interactive_time_limits_enforce(now=STARTED + timedelta(hours=16)) == 1
    fresh.refresh_from_db()
    assert fresh.status == Status.STOPPED
