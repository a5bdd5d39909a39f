"""The simulated cluster's log lines: made from the pod and workload rows and the clock."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from console.clock import ManualClock
from jobs.backends.log_lines import LogsUnavailable, line_time
from jobs.backends.simulated import SimulatedBackend
from jobs.choices import PodStatus
from jobs.models import Pod, Workload
from jobs.services.workloads import Shape, instance_start

pytestmark = pytest.mark.django_db
STEP = re.compile(r"\[rank 0\] step (\d+) loss (\d+\.\d+)$")


def text(line: str) -> str:
    """The line without its timestamp."""
    return line.split(" ", 1)[1]


def logs(sim: SimulatedBackend, pod: Pod, clock: ManualClock, **kw: Any) -> list[str]:
    """The pod's log as of now (everything, unless told)."""
    kw.setdefault("tail", 5000)
    kw.setdefault("since", None)
    return sim.logs(Pod.objects.get(pk=pod.pk), now=clock.now(), **kw)


@pytest.fixture
def running(
    bob: Any, submit: Callable[..., Workload], tick: Callable[..., None]
) -> Callable[..., Pod]:
    """Bob's job, started: its first pod."""

    def start(**kw: Any) -> Pod:
        job = submit(bob, "resnet", checkpoint_interval=600, total_work=8 * 7200, **kw)
        tick(0)
        tick(31)
        pod = job.pods.get()
        assert pod.status == PodStatus.RUNNING
        return pod

    return start


def test_training_prints_steps_with_a_falling_loss_and_checkpoints_at_the_checkpoint_times(
    sim: SimulatedBackend, clock: ManualClock, tick: Callable[..., None], running: Any
) -> None:
    pod = running()
    for _ in range(4):
        tick(600)
    job = Workload.objects.get(pk=pod.workload_id)
    lines = logs(sim, pod, clock)
    assert "world size 1, 8 GPU(s) per rank" in text(lines[0])
    assert "no checkpoint to resume from" in text(lines[1])
    losses = [float(m[2]) for m in map(STEP.search, lines) if m]
    assert len(losses) == 80 and losses[-1] < losses[0] - 0.2
    saved = [line_time(line) for line in lines if "checkpoint saved" in line]
    # The simulator's checkpoints are the ones the log shows: the last one is the job's.
    assert len(saved) == 4 and saved[-1] == job.last_checkpoint_at
    assert [b - a for a, b in zip(saved, saved[1:], strict=False)] == [timedelta(seconds=600)] * 3
    times = [line_time(line) for line in lines]
    assert times == sorted(times) and times[-1] <= clock.now()
    assert logs(sim, pod, clock) == lines  # the same replica prints the same lines


def test_tail_and_since_cut_the_lines(
    sim: SimulatedBackend, clock: ManualClock, tick: Callable[..., None], running: Any
) -> None:
    pod = running()
    tick(1200)
    everything = logs(sim, pod, clock)
    assert logs(sim, pod, clock, tail=3) == everything[-3:]
    middle = line_time(everything[10])
    assert logs(sim, pod, clock, since=middle) == everything[11:]
    clock.advance(90)  # three more steps, nothing else
    newer = logs(sim, pod, clock, since=line_time(everything[-1]))
    assert [STEP.search(line) is not None for line in newer] == [True] * 3


def test_a_crashed_replica_ends_with_the_crash(
    sim: SimulatedBackend, clock: ManualClock, tick: Callable[..., None], running: Any
) -> None:
    pod = running()
    tick(300)
    sim.inject_pod_crash(pod, exit_code=137)
    tick(5)
    pod.refresh_from_db()
    assert pod.status == PodStatus.FAILED
    lines = logs(sim, pod, clock)
    assert "ERROR" in lines[-2] and (pod.message or pod.reason) in lines[-2]
    assert text(lines[-1]) == "[rank 0] process exited; exit code 137"
    assert line_time(lines[-1]) == pod.ended_at
    clock.advance(600)  # an ended replica prints nothing more
    assert logs(sim, pod, clock) == lines


def test_a_replica_that_has_not_started_has_no_lines_and_says_why(
    bob: Any, sim: SimulatedBackend, clock: ManualClock, submit: Any, tick: Any
) -> None:
    job = submit(bob, "waiting")
    tick(0)
    pod = job.pods.get()
    with pytest.raises(LogsUnavailable, match="has not started yet"):
        logs(sim, pod, clock)


def test_a_finished_job_says_it_completed(
    bob: Any, sim: SimulatedBackend, clock: ManualClock, submit: Any, tick: Any
) -> None:
    job = submit(bob, "short", total_work=8 * 120)
    tick(0)
    tick(31)
    tick(200)
    pod = job.pods.get()
    assert pod.status == PodStatus.SUCCEEDED
    assert text(logs(sim, pod, clock)[-1]).startswith("[rank 0] training complete after step")


def test_services_print_requests_served_and_instances_print_jupyter(
    alice: Any,
    demo: Any,
    sim: SimulatedBackend,
    clock: ManualClock,
    tick: Callable[..., None],
    service: Workload,
) -> None:
    instance = instance_start(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="nb",
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        max_duration=7200,
        now=clock.now(),
    )
    tick(0)
    tick(31)
    tick(600)
    # The simulator plays some notebooks as in use: this one never had an activity report.
    Workload.objects.filter(pk=instance.pk).update(last_activity_at=None)
    served = logs(sim, service.pods.get(), clock)
    assert "loading model weights" in served[0]
    assert sum("requests in the last minute" in line for line in served) == 10
    notebook = logs(sim, instance.pods.get(), clock)
    assert "Jupyter Server" in notebook[0] and f"{instance.pods.get().name}:8888" in notebook[1]
    assert not [line for line in notebook if "Saving file" in line]  # nobody worked in it


def test_a_notebook_saves_while_in_use_and_stops_printing_when_abandoned(
    alice: Any, demo: Any, sim: SimulatedBackend, clock: ManualClock, tick: Callable[..., None]
) -> None:
    instance = instance_start(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="nb",
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        max_duration=7 * 3600,
        now=clock.now(),
    )
    tick(0)
    tick(31)
    pod = instance.pods.get()
    assert pod.started_at is not None
    last_use = pod.started_at + timedelta(minutes=40)
    Workload.objects.filter(pk=instance.pk).update(last_activity_at=last_use)
    tick(3 * 3600)  # abandoned for more than two hours
    saves = [line_time(line) for line in logs(sim, pod, clock) if "Saving file" in line]
    assert len(saves) == 8 and saves[-1] == last_use  # every five minutes, then never again
    assert len(logs(sim, pod, clock, tail=2)) == 2


def test_an_attempt_resumed_from_a_checkpoint_counts_its_steps_from_there(
    sim: SimulatedBackend, clock: ManualClock, tick: Callable[..., None], running: Any
) -> None:
    pod = running()
    Pod.objects.filter(pk=pod.pk).update(resume_from="1200")
    tick(60)
    lines = logs(sim, pod, clock)
    assert text(lines[1]) == "[rank 0] resuming from checkpoint 1200"
    assert [m[1] for m in map(STEP.search, lines) if m] == ["1201", "1202"]
