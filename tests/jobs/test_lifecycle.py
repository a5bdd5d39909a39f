"""Workload lifecycles through services and task functions, with an injected clock."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.models import Node
from cluster.services import node_schedulable_set
from jobs.choices import EventKind, PodStatus, Status
from jobs.models import Workload
from jobs.services import cycle
from jobs.services.scaling import service_scale
from jobs.services.sync import backend_sync
from jobs.services.workloads import workload_cancel
from quotas.amounts import Amounts
from quotas.services.quotas import quota_scale

pytestmark = pytest.mark.django_db


def _refresh(w: Workload) -> Workload:
    w.refresh_from_db()
    return w


def _pod_statuses(w: Workload) -> list[str]:
    return sorted(p.status for p in w.pods.all())


def test_job_is_admitted_runs_and_succeeds(bob, submit, tick) -> None:
    job = submit(bob, "resnet", replicas=2, gpus=8, total_work=16 * 3600)
    assert job.status == Status.QUEUED
    tick()
    job = _refresh(job)
    assert job.status == Status.RUNNING and job.in_quota is True
    assert _pod_statuses(job) == [PodStatus.PENDING, PodStatus.PENDING]
    tick(30)
    assert _pod_statuses(job) == [PodStatus.RUNNING, PodStatus.RUNNING]
    tick(1800)
    assert 0.45 < _refresh(job).progress / job.total_work < 0.55
    tick(1800)
    job = _refresh(job)
    assert job.status == Status.SUCCEEDED
    assert _pod_statuses(job) == [PodStatus.SUCCEEDED, PodStatus.SUCCEEDED]
    kinds = list(job.events.values_list("kind", flat=True))
    assert kinds[:3] == [EventKind.SUBMITTED, EventKind.ADMITTED, EventKind.PLACED]
    assert kinds[-1] == EventKind.FINISHED


def test_borrowed_job_is_preempted_requeued_and_resumes_from_checkpoint(
    bob, submit, service, tick, clock
) -> None:
    own = submit(bob, "own", replicas=6, total_work=48 * 8 * 3600)
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
    assert _refresh(own).in_quota is True
    assert _refresh(borrowed).in_quota is False
    assert _refresh(service).status == Status.RUNNING

    tick(1500)  # 25 minutes: checkpoints at 10 and 20 minutes, 5 minutes of work since
    at_preemption = _refresh(borrowed).progress
    service_scale(service=service, replicas=8, now=clock.now(), reason="rule day")
    tick()
    borrowed = _refresh(borrowed)
    assert borrowed.status == Status.REQUEUED
    # it says at once why it waits again, not only from the next cycle on
    assert borrowed.pending_reason == (
        "Quota 1.1 has 0 of 48 GPUs free in pool A100-80G (the job needs 40 GPUs), and only 16 "
        "idle GPUs can be borrowed there (it needs 40 GPUs)"
    )
    assert _pod_statuses(borrowed) == [PodStatus.PREEMPTED] * 5
    event = borrowed.events.get(kind=EventKind.PREEMPTED)
    assert event.data["by"] == "chat-api" and event.data["reason"] == "reclaim"
    assert event.message.startswith(
        "Preempted by chat-api: reclaimed: it ran on capacity borrowed from Quota 1."
    )
    lost = event.data["work_lost_gpu_seconds"]
    assert lost == pytest.approx(40 * 300, rel=0.01)  # five minutes on 40 GPUs
    assert borrowed.progress == pytest.approx(at_preemption - lost)
    tick(30)
    assert len(_refresh(service).pods.filter(status=PodStatus.RUNNING)) == 8

    service_scale(service=service, replicas=1, now=clock.now(), reason="rule night")
    tick()
    borrowed = _refresh(borrowed)
    assert borrowed.status == Status.RUNNING and borrowed.restarts == 1
    assert "Resumed from its last checkpoint" in borrowed.events.get(kind=EventKind.RESUMED).message
    tick(30)
    tick(4 * 3600)
    assert _refresh(borrowed).status == Status.SUCCEEDED


def test_a_victim_without_fault_tolerance_fails_and_is_given_no_pending_reason(
    bob, submit, service, tick, clock
) -> None:
    submit(bob, "own", replicas=6)
    tick(1)
    borrowed = submit(bob, "borrowed", replicas=5, idle_policy="acceptable", fault_tolerance=False)
    tick(1)
    assert _refresh(borrowed).in_quota is False
    service_scale(service=service, replicas=8, now=clock.now(), reason="rule day")
    tick()
    borrowed = _refresh(borrowed)
    assert borrowed.status == Status.FAILED
    assert borrowed.status_reason.endswith("fault tolerance is off.")
    assert borrowed.pending_reason == ""


def test_a_running_service_says_why_its_other_replicas_wait(service, tick, clock) -> None:
    tick()
    for node in Node.objects.order_by("name")[2:]:
        node_schedulable_set(node=node, schedulable=False)
    service_scale(service=service, replicas=4, now=clock.now(), reason="rule day")
    tick()
    service = _refresh(service)
    assert service.status == Status.RUNNING
    assert service.pending_reason.startswith("2 of 4 replicas are waiting: "), (
        service.pending_reason
    )


def test_a_higher_priority_job_borrows_beside_an_in_quota_one_and_is_the_one_reclaimed(
    bob, carol, submit, service, tick
) -> None:
    # Issue 13 through the database: the label is stored, and the core keeps it.
    own = submit(bob, "own", replicas=6)  # Quota 1.1's 48 GPUs, idle policy none
    tick(1)
    hi = submit(bob, "hi", priority=9, idle_policy="acceptable")
    tick(1)
    assert _refresh(own).in_quota is True
    assert _refresh(hi).in_quota is False
    assert not _refresh(own).events.filter(kind=EventKind.ADMITTED, data__label=True).exists()
    big = submit(carol, "big", replicas=9)  # 72 of Quota 1.2's 80: one node short
    tick(1)
    assert _refresh(big).status == Status.RUNNING and big.in_quota is True
    # hi, the borrower, is the one reclaimed; waiting again with nothing idle, it then wins
    # its quota's place by priority: each message names the kind that really took the job
    event = _refresh(hi).events.get(kind=EventKind.PREEMPTED)
    assert event.data["reason"] == "reclaim" and event.data["by"] == "big"
    assert "reclaimed: it ran on capacity borrowed from Quota 1.2" in event.message
    own, hi = _refresh(own), _refresh(hi)
    assert hi.status == Status.RUNNING and hi.in_quota is True
    event = own.events.get(kind=EventKind.PREEMPTED)
    assert event.data["reason"] == "priority" and event.data["by"] == "hi"
    assert "a higher-priority job in Quota 1.1" in event.message


def test_crash_restarts_up_to_max_restarts_then_fails(bob, submit, tick, sim) -> None:
    job = submit(bob, "flaky", max_restarts=2, total_work=8 * 36000)
    for attempt in range(3):
        tick()
        tick(30)
        sim.inject_pod_crash(job.pods.get(status=PodStatus.RUNNING), exit_code=137)
        tick(60)
        job = _refresh(job)
        if attempt < 2:
            assert job.status in {Status.REQUEUED, Status.RUNNING}
            assert job.failures == attempt + 1
    assert job.status == Status.FAILED
    assert "exit code 137" in job.status_reason and "2 of 2 restarts used" in job.status_reason


def test_hang_is_detected_and_the_job_restarted(bob, submit, tick, sim) -> None:
    job = submit(bob, "stuck", hang_minutes=10, total_work=8 * 36000)
    tick()
    tick(30)
    sim.inject_hang(job)
    tick(300)
    assert _refresh(job).status == Status.RUNNING
    tick(600)
    job = _refresh(job)
    assert job.restarts == 1
    assert job.events.filter(kind=EventKind.FAULT, message__contains="hang detected").exists()
    tick()
    assert _refresh(job).status == Status.RUNNING


def test_a_hung_job_without_fault_tolerance_fails_with_reason_hung(bob, submit, tick, sim) -> None:
    # Every backend detects hangs now (issue 14): the simulator's running replicas send
    # heartbeats, and a hung job's stop, so its silence is what is detected.
    job = submit(bob, "quiet", hang_minutes=10, fault_tolerance=False, total_work=8 * 36000)
    tick()
    tick(30)
    sim.inject_hang(job)
    tick(540)
    assert _refresh(job).status == Status.RUNNING
    tick(120)
    job = _refresh(job)
    assert job.status == Status.FAILED and job.restarts == 0
    assert job.status_reason == (
        "Hung: no heartbeat or progress from replica 0 for 10 minutes; fault tolerance is off."
    )
    assert job.pods.get().status == PodStatus.STOPPED


def test_node_down_reschedules_replicas_elsewhere(bob, submit, tick, sim) -> None:
    job = submit(bob, "resilient", replicas=2, total_work=16 * 36000)
    tick()
    tick(30)
    lost_node = job.pods.first().node.name
    sim.inject_node_down(lost_node)
    tick(10)
    job = _refresh(job)
    assert job.status == Status.RUNNING and job.restarts == 1
    live = job.pods.filter(status__in=[PodStatus.PENDING, PodStatus.RUNNING])
    assert live.count() == 2
    assert lost_node not in {p.node.name for p in live}


def test_cancel_stops_pods_and_frees_capacity_for_the_queue(bob, submit, tick, clock) -> None:
    big = submit(bob, "big", replicas=6)
    clock.advance(1)
    waiting = submit(bob, "waiting", replicas=1)
    tick()
    assert _refresh(waiting).status == Status.QUEUED
    assert "Quota 1.1" in _refresh(waiting).pending_reason
    workload_cancel(actor=bob, workload=big)
    tick()
    assert _pod_statuses(_refresh(big)) == [PodStatus.STOPPED] * 6
    assert _refresh(waiting).status == Status.RUNNING


def test_scale_preview_lists_jobs_that_would_become_not_in_quota(bob, submit, tick, demo) -> None:
    from jobs.bridge.preview import scale_preview
    from quotas.amounts import Amounts

    first = submit(bob, "first", replicas=3)
    tick(1)
    second = submit(bob, "second", replicas=3)
    tick(1)
    quota = demo.quotas["Quota 1.1"]
    touched = scale_preview(
        quota, {demo.node_pool: Amounts(min_gpu=24_000)}, now=second.submitted_at
    )
    assert [w.name for w in touched] == ["second"]
    assert (
        scale_preview(quota, {demo.node_pool: Amounts(min_gpu=48_000)}, now=first.submitted_at)
        == []
    )


def test_a_service_is_capped_at_its_max_replicas_not_its_first_target(demo, alice, clock) -> None:
    from console.errors import DomainError
    from jobs.services.workloads import Shape, service_create
    from workspaces.models import ResourceUsageRule

    ResourceUsageRule.objects.filter(workspace=demo.workspaces["workspace_a"]).update(
        max_gpus=16_000
    )
    with pytest.raises(DomainError) as refused:
        service_create(
            actor=alice,
            workspace=demo.workspaces["workspace_a"],
            quota=demo.quotas["Quota 1"],
            name="too-wide",
            shape=Shape(replicas=1, gpu=8000),
            node_pools=[demo.node_pool],
            max_replicas=4,
            now=clock.now(),
        )
    assert refused.value.field == "gpu"
    assert "caps your role at 16 GPUs; this asks for 32" in refused.value.message
    assert not Workload.objects.filter(name="too-wide").exists()


@pytest.mark.parametrize("change", ["cancel", "node_down", "quota_scale", "pod_started", "submit"])
def test_a_cycle_applies_no_decision_made_before_a_change_it_did_not_see(
    bob: Any,
    admin: Any,
    submit: Any,
    tick: Any,
    clock: Any,
    sim: Any,
    demo: Any,
    monkeypatch: Any,
    change: str,
) -> None:
    """The cycle plans outside its write transaction; a writer committing before it takes
    the write lock (a cancel, a node lost, a quota scaled, a pod started) makes it plan
    again, while a new submit alone does not."""
    running = submit(bob, "running", gpus=8)
    tick()  # admitted: its pod is Pending until the cluster starts it
    waiting = submit(bob, "waiting", gpus=8)
    plans: list[int] = []
    plan, lock = cycle._plan, cycle._cycle_lock

    def counted(now: Any) -> Any:
        plans.append(1)
        return plan(now)

    def meanwhile() -> Any:
        """Another writer commits between the plan and the write transaction."""
        if change == "cancel":
            workload_cancel(actor=bob, workload=waiting, now=clock.now())
        elif change == "node_down":
            for node in Node.objects.all():
                node_schedulable_set(node=node, schedulable=False)
        elif change == "quota_scale":
            quota = waiting.quota
            quota_scale(actor=admin, quota=quota, resources={demo.node_pool: Amounts(8000)})
        elif change == "pod_started":
            clock.advance(30)
            backend_sync(now=clock.now(), backend=sim)
        else:
            submit(bob, "later", gpus=8)
        return lock()

    monkeypatch.setattr(cycle, "_plan", counted)
    monkeypatch.setattr(cycle, "_cycle_lock", meanwhile)
    summary = cycle.scheduling_cycle_run(now=clock.now(), backend=sim)
    waiting.refresh_from_db()
    assert len(plans) == (1 if change == "submit" else 2)
    assert running.pods.get().status == (
        PodStatus.RUNNING if change == "pod_started" else PodStatus.PENDING
    )
    if change == "submit":  # planned before "later" came: only "waiting" was considered
        assert summary.admitted == 1 and waiting.status == Status.RUNNING
        assert Workload.objects.get(name="later").status == Status.QUEUED
    elif change == "pod_started":  # the same decision, made again from what is there now
        assert summary.admitted == 1 and waiting.status == Status.RUNNING
    else:
        assert summary.admitted == 0 and not waiting.pods.exists()
        assert waiting.status == (Status.CANCELLED if change == "cancel" else Status.QUEUED)


def test_replicas_added_later_continue_the_pod_indexes(service, tick, clock) -> None:
    tick()
    service_scale(service=service, replicas=3, now=clock.now(), reason="busier")
    tick()
    assert sorted(service.pods.values_list("index", "status")) == [
        (0, PodStatus.PENDING),
        (1, PodStatus.PENDING),
        (2, PodStatus.PENDING),
    ]
