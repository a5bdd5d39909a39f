"""Signals from running workloads, handled the same way on both backends (issue 14).

Hang detection from heartbeats, resume from the last reported checkpoint with work lost
counted from its time, the ExitCodeAndErrorMsg policy, and idle stop from activity. The
Kubernetes cases drive the real client against the stand-in API server (k8s_fake.py); the
report endpoint's flush is another module, so a report is written here as it stores one:
heartbeats on the Pod row, the checkpoint label and time on the Workload row.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from console.clock import ManualClock
from console.errors import DomainError
from jobs.backends.simulated import SimulatedBackend
from jobs.choices import EventKind, FailurePolicy, PodStatus, Status
from jobs.models import Pod, Workload
from jobs.services.limits import interactive_time_limits_enforce
from jobs.services.workloads import Shape, instance_start
from tests.jobs import test_kubernetes_backend as kb
from tests.jobs.k8s_fake import FakeCluster

# The Kubernetes harness's fixtures (stand-in server, backend, control-loop tick, submit).
server, cluster, k8s, loop, train = kb.server, kb.cluster, kb.k8s, kb.loop, kb.train
IMAGE, NAMESPACE, running = kb.IMAGE, kb.NAMESPACE, kb.running

pytestmark = pytest.mark.django_db
GPUS = 8  # per replica, as `train` submits them


def _refresh(w: Workload) -> Workload:
    w.refresh_from_db()
    return w


def failed(code: int, message: str = "", reason: str = "Error") -> dict[str, Any]:
    """A Failed pod's status: its container ended with an exit code and termination message."""
    ended: dict[str, Any] = {"exitCode": code, "reason": reason}
    if message:
        ended["message"] = message
    container = {
        "name": "main",
        "image": IMAGE,
        "imageID": f"{IMAGE}@sha256:0",
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": ended},
    }
    return {"phase": "Failed", "containerStatuses": [container]}


def heartbeat(job: Workload, at: datetime) -> None:
    """Every running replica of the job reports a heartbeat (as the report flush stores it)."""
    Pod.objects.filter(workload=job, status=PodStatus.RUNNING).update(last_heartbeat_at=at)


def checkpoint(job: Workload, label: str, at: datetime) -> None:
    """The job reports a checkpoint (as the report flush stores it)."""
    Workload.objects.filter(pk=job.pk).update(checkpoint_label=label, last_checkpoint_at=at)


def started(loop: Callable[..., None], cluster: FakeCluster, job: Workload) -> None:
    """Admit the job, then the kubelet runs its pods and the sync sees them run."""
    loop()
    running(cluster, job)
    loop(0)
    assert set(job.pods.values_list("status", flat=True)) == {PodStatus.RUNNING}


def first_pod(job: Workload) -> Pod:
    pod = job.pods.filter(status=PodStatus.RUNNING).order_by("index").first()
    assert pod is not None
    return pod


# --- hang detection -------------------------------------------------------------------------


def test_kubernetes_job_sending_heartbeats_is_kept_and_restarted_once_they_stop(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster, clock: Any
) -> None:
    job = train(hang_minutes=10)
    started(loop, cluster, job)
    for _ in range(4):  # 20 minutes, a heartbeat every 5: never 10 minutes silent
        heartbeat(job, clock.now())
        loop(300)
    assert _refresh(job).status == Status.RUNNING and job.restarts == 0
    silent_since = clock.now() - timedelta(seconds=300)  # the last heartbeat
    loop(299)  # 9 min 59 s since it
    assert _refresh(job).restarts == 0
    loop(1)
    job = _refresh(job)
    assert clock.now() - silent_since == timedelta(minutes=10)
    assert job.status == Status.REQUEUED and job.restarts == 1
    fault = job.events.get(kind=EventKind.FAULT)
    assert fault.message == (
        "No heartbeat or progress from replica 0 for 10 minutes (hang detected)"
    )


def test_kubernetes_job_that_never_reports_fails_hung_after_its_window(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    job = train(hang_minutes=10, fault_tolerance=False)
    started(loop, cluster, job)
    loop(595)
    assert _refresh(job).status == Status.RUNNING
    loop(5)
    job = _refresh(job)
    assert job.status == Status.FAILED
    assert job.status_reason == (
        "Hung: no heartbeat or progress from replica 0 for 10 minutes; fault tolerance is off."
    )
    # the stopped replicas' pods are deleted from the cluster once the failure commits
    assert len(cluster.seen("DELETE")) == 2


def test_simulated_replicas_send_heartbeats_until_the_job_hangs(
    bob: Any, submit: Callable[..., Workload], tick: Callable[..., None], sim: SimulatedBackend
) -> None:
    job = submit(bob, "stuck", hang_minutes=10, total_work=8 * 36000)
    tick()
    tick(30)
    tick(60)
    beat = first_pod(job).last_heartbeat_at
    assert beat is not None
    sim.inject_hang(job)
    tick(540)
    assert first_pod(job).last_heartbeat_at == beat  # silent since the hang
    assert _refresh(job).restarts == 0
    tick(60)
    assert _refresh(job).restarts == 1


# --- checkpoint resume and work lost --------------------------------------------------------


def test_the_second_attempt_resumes_from_the_reported_checkpoint_losing_the_time_since(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster, clock: Any
) -> None:
    job = train()  # 2 replicas × 8 GPUs
    started(loop, cluster, job)
    assert {p.resume_from for p in job.pods.all()} == {""}  # the first attempt: from scratch
    loop(600)
    checkpoint(job, "step-1200", clock.now())
    loop(900)  # 15 minutes after the checkpoint, replica 0 dies
    cluster.set_status(NAMESPACE, first_pod(job).name, **failed(137, reason="OOMKilled"))
    loop(0)
    job = _refresh(job)
    assert job.status == Status.REQUEUED
    restart = job.events.get(kind=EventKind.RESTARTED)
    assert restart.data["work_lost_gpu_seconds"] == 2 * GPUS * 900  # 4 GPU-hours
    assert "Work lost since the last checkpoint (step-1200): 4.00 GPU-hours." in restart.message
    loop(0)  # the next cycle admits the second attempt
    second = list(job.pods.filter(attempt=1))
    assert len(second) == 2 and {p.resume_from for p in second} == {"step-1200"}
    resumed = job.events.get(kind=EventKind.RESUMED)
    assert resumed.data["resume_from"] == "step-1200"


def test_without_a_reported_checkpoint_work_lost_counts_from_the_start(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster, clock: Any
) -> None:
    job = train(replicas=1)
    started(loop, cluster, job)
    start = _refresh(job).last_checkpoint_at  # every replica ran: the attempt's work began
    loop(1200)
    cluster.set_status(NAMESPACE, first_pod(job).name, **failed(1))
    loop(0)
    restart = _refresh(job).events.get(kind=EventKind.RESTARTED)
    assert start is not None
    assert restart.data["work_lost_gpu_seconds"] == GPUS * (clock.now() - start).total_seconds()
    assert "Work lost since the start (no checkpoint reported)" in restart.message
    loop(0)
    assert job.pods.get(attempt=1).resume_from == ""


def test_a_preempted_victim_loses_the_gpu_time_since_its_simulated_checkpoint(
    bob: Any,
    submit: Callable[..., Workload],
    service: Workload,
    tick: Callable[..., None],
    clock: ManualClock,
) -> None:
    from jobs.services.scaling import service_scale

    submit(bob, "own", replicas=6, total_work=48 * 8 * 3600)
    tick(1)
    borrowed = submit(
        bob,
        "borrowed",
        replicas=5,
        idle_policy="acceptable",
        checkpoint_interval=600,
        total_work=40 * 4 * 3600,
    )
    tick(1)
    tick(30)
    tick(1500)  # checkpoints at 10 and 20 minutes of training, 5 minutes since the second
    saved = _refresh(borrowed)
    assert saved.checkpoint_label == "step-1200"
    service_scale(service=service, replicas=8, now=clock.now(), reason="rule day")
    tick()
    event = _refresh(borrowed).events.get(kind=EventKind.PREEMPTED)
    assert saved.last_checkpoint_at is not None
    since = (clock.now() - saved.last_checkpoint_at).total_seconds()
    assert since == 300
    assert event.data["work_lost_gpu_seconds"] == 40 * 300
    assert event.data["checkpoint"] == "step-1200"
    assert "Work lost since the last checkpoint (step-1200): 3.33 GPU-hours." in event.message


# --- ExitCodeAndErrorMsg --------------------------------------------------------------------

POLICY = {
    "failure_policy": FailurePolicy.EXIT_CODE_AND_ERROR_MSG,
    "retry_exit_codes": [137],
    "fail_messages": ["CUDA out of memory"],
}


def test_kubernetes_retries_a_listed_exit_code_and_fails_on_a_listed_message(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    job = train(replicas=1, **POLICY)
    started(loop, cluster, job)
    cluster.set_status(NAMESPACE, first_pod(job).name, **failed(137, reason="OOMKilled"))
    loop(0)
    job = _refresh(job)
    assert job.status == Status.REQUEUED and job.failures == 1
    fault = job.events.get(kind=EventKind.FAULT)
    assert fault.message.endswith("(exit code 137 is in the retry list).")
    loop(0)  # the second attempt is admitted and its pod created
    cluster.set_status(NAMESPACE, job.pods.get(attempt=1).name, phase="Running")
    loop(0)
    said = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    # exit code 137 again, but the message is in the fail list: the fail list wins
    cluster.set_status(NAMESPACE, first_pod(job).name, **failed(137, said))
    loop(0)
    job = _refresh(job)
    assert job.status == Status.FAILED and job.failures == 1
    rule = "the message matches 'CUDA out of memory' in the fail list"
    assert rule in job.status_reason
    assert job.events.get(kind=EventKind.FINISHED).message == job.status_reason
    assert job.pods.get(attempt=1).message == said


def test_kubernetes_fails_an_unlisted_exit_code_under_the_policy(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    job = train(replicas=1, **POLICY)
    started(loop, cluster, job)
    cluster.set_status(NAMESPACE, first_pod(job).name, **failed(2, "bad argument"))
    loop(0)
    job = _refresh(job)
    assert job.status == Status.FAILED and job.restarts == 0
    assert "exit code 2 and its message match no retry rule" in job.status_reason


def test_simulated_crashes_follow_the_policy_too(
    bob: Any, submit: Callable[..., Workload], tick: Callable[..., None], sim: SimulatedBackend
) -> None:
    job = submit(bob, "picky", total_work=8 * 36000, **POLICY)
    tick()
    tick(30)
    sim.inject_pod_crash(first_pod(job), exit_code=137)
    tick(5)
    assert _refresh(job).failures == 1
    tick(5)
    tick(30)
    said = "CUDA out of memory at step 9"
    out = StringIO()  # the command line injects the same fault
    call_command(
        "inject_fault",
        "pod-crash",
        "workspace_b/picky",
        "--exit-code=1",
        "--message",
        said,
        stdout=out,
    )
    assert out.getvalue() == f"Pod 1 of workspace_b/picky crashes with exit code 1: {said}.\n"
    tick(5)
    job = _refresh(job)
    assert job.status == Status.FAILED
    assert "matches 'CUDA out of memory' in the fail list" in job.status_reason


def test_the_policy_is_checked_at_submit_naming_the_field(
    bob: Any, submit: Callable[..., Workload]
) -> None:
    with pytest.raises(DomainError, match="not a valid regular expression") as bad:
        submit(bob, "bad-re", failure_policy="ExitCodeAndErrorMsg", retry_messages=["(NCCL"])
    assert bad.value.field == "retry_messages"
    with pytest.raises(DomainError, match="not a whole number from 1 to 255") as bad:
        submit(bob, "bad-code", failure_policy="ExitCodeAndErrorMsg", fail_exit_codes=[300])
    assert bad.value.field == "fail_exit_codes"
    with pytest.raises(DomainError, match="only with the ExitCodeAndErrorMsg policy") as bad:
        submit(bob, "no-policy", retry_exit_codes=[137])
    assert bad.value.field == "failure_policy"
    assert not Workload.objects.filter(name__in=["bad-re", "bad-code", "no-policy"]).exists()


# --- idle auto-stop from activity -----------------------------------------------------------


def test_a_notebook_in_use_is_kept_past_its_idle_timeout_and_an_abandoned_one_stopped(
    demo: Any, carol: Any, tick: Callable[..., None], clock: ManualClock, login: Any
) -> None:
    made = [
        instance_start(
            actor=carol,
            workspace=demo.workspaces["workspace_c"],
            quota=demo.quotas["Quota 1.2"],
            name=f"notebook-{i}",
            shape=Shape(replicas=1, gpu=1000),
            node_pools=[demo.node_pool],
            max_duration=8 * 3600,
            idle_stop_minutes=30,
            now=clock.now(),
        )
        for i in range(2)
    ]
    in_use, abandoned = sorted(made, key=lambda w: w.pk % 2)  # the simulator's even/odd
    tick()
    tick(30)
    for _ in range(12):  # an hour, five minutes at a time
        tick(300)
        interactive_time_limits_enforce(now=clock.now())
    in_use, abandoned = _refresh(in_use), _refresh(abandoned)
    assert in_use.status == Status.RUNNING
    assert in_use.started_at is not None and in_use.last_activity_at is not None
    assert clock.now() - in_use.started_at > timedelta(minutes=30)  # past its idle timeout
    assert clock.now() - in_use.last_activity_at < timedelta(minutes=30)
    page = reverse("jobs:instance_detail", args=["workspace_c", in_use.pk])
    assert 'data-field="activity">30s ago<' in login(carol).get(page).content.decode()
    assert abandoned.status == Status.STOPPED
    assert abandoned.status_reason == "Idle for 30 minutes"
    assert abandoned.last_activity_at is not None and abandoned.ended_at is not None
    # stopped 30 minutes after its last activity, at the first check from then on
    idle = abandoned.ended_at - abandoned.last_activity_at
    assert timedelta(minutes=30) <= idle < timedelta(minutes=35)


# --- submit and show ------------------------------------------------------------------------


def test_the_api_takes_the_policy_and_refuses_a_bad_pattern_naming_the_field(
    demo: Any, bob: Any
) -> None:
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    token, _ = Token.objects.get_or_create(user=bob)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    base = {"workspace": "workspace_b", "quota": "Quota 1.1", "gpu": 8}
    policy = {"failure_policy": "ExitCodeAndErrorMsg", "retry_exit_codes": [137, 143]}
    bad = client.post(
        "/api/v1/jobs/", {**base, **policy, "name": "bad", "fail_messages": ["(oom"]}, "json"
    )
    assert bad.status_code == 400
    (message,) = bad.json()["fail_messages"]
    assert message.startswith("'(oom' is not a valid regular expression")
    ok = client.post(
        "/api/v1/jobs/", {**base, **policy, "name": "ok", "fail_messages": ["OOM"]}, "json"
    )
    assert ok.status_code == 201, ok.json()
    for shown in (ok.json(), client.get(f"/api/v1/jobs/{ok.json()['id']}/").json()):
        assert shown["failure_policy"] == "ExitCodeAndErrorMsg"
        assert (shown["retry_exit_codes"], shown["fail_messages"]) == ([137, 143], ["OOM"])
        assert (shown["checkpoint_label"], shown["retry_messages"]) == ("", [])
    (listed,) = client.get("/api/v1/jobs/?workspace=workspace_b").json()["results"]
    assert (listed["retry_exit_codes"], listed["fail_exit_codes"]) == ([137, 143], [])


def test_the_form_refuses_a_bad_exit_code_on_its_field(demo: Any, login: Any, bob: Any) -> None:
    from tests.jobs.test_forms import _job

    page = reverse("jobs:job_submit", args=["workspace_b"])
    data = _job(demo, failure_policy="ExitCodeAndErrorMsg", retry_exit_codes="137, x9")
    response = login(bob).post(page, data)
    assert response.status_code == 200
    assert response.context["form"].errors["retry_exit_codes"] == [
        "'x9' is not an exit code: write whole numbers."
    ]
    data = _job(
        demo,
        failure_policy="ExitCodeAndErrorMsg",
        retry_exit_codes="137, 143",
        fail_messages="CUDA out of memory\n\nNCCL timeout",
    )
    assert login(bob).post(page, data).status_code == 302
    job = Workload.objects.get(name="resnet")
    assert (job.retry_exit_codes, job.fail_messages) == (
        [137, 143],
        ["CUDA out of memory", "NCCL timeout"],
    )


def test_the_job_page_shows_the_policy_heartbeat_and_checkpoint(
    bob: Any, submit: Callable[..., Workload], tick: Callable[..., None], login: Any
) -> None:
    job = submit(bob, "shown", checkpoint_interval=600, total_work=8 * 36000, **POLICY)
    page = reverse("jobs:job_detail", args=["workspace_b", job.pk])
    body = login(bob).get(page).content.decode()
    assert (
        "ExitCodeAndErrorMsg: retry exit code 137; fail at once on a message matching "
        "&#x27;CUDA out of memory&#x27;; any other failure fails the job" in body
    )
    assert ">no checkpoint reported<" in body and ">none reported<" in body
    tick()
    tick(30)
    tick(600)  # a checkpoint after 10 minutes of training, a heartbeat at each sync
    body = login(bob).get(page).content.decode()
    assert ">step-600, 0s ago<" in body
    assert 'data-field="heartbeat">0s ago<' in body


def test_the_demo_seeds_a_notebook_in_use_and_an_abandoned_one(
    demo: Any, clock: ManualClock
) -> None:
    from console.demo import seed_demo_notebooks
    from jobs.backends.simulated import last_activity

    made = seed_demo_notebooks(now=clock.now())
    assert seed_demo_notebooks(now=clock.now()) == made  # seeding again adds nothing
    assert sorted(w.pk % 2 for w in made) == [0, 1]
    assert {w.idle_stop_minutes for w in made} == {30}
    hours_later = clock.now() + timedelta(hours=2)
    for w in made:
        w.started_at = clock.now()
    active = sorted(last_activity(w, hours_later) or clock.now() for w in made)
    # the abandoned one's last activity is 20 minutes in; the one in use's is now
    assert active == [clock.now() + timedelta(minutes=20), hours_later]
