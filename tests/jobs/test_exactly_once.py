"""Every writer applies to the state as it is under the write lock: a lost race changes nothing.

The control loop's writers read what they change after taking the write lock
(`cluster.locking`), so news that arrives late (a report of a pod that has since been stopped, a
plan made before a cancel) is applied to the current rows and, where it no longer holds, is
dropped. Each test hands a writer such late news and checks nothing moved backwards.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from cluster.locking import state_version
from jobs.backends.base import PodReport
from jobs.backends.simulated import SimulatedBackend
from jobs.choices import EventKind, PodStatus, Status
from jobs.models import Pod, Workload
from jobs.services.limits import interactive_time_limits_enforce
from jobs.services.scaling import service_scale
from jobs.services.sync import backend_sync
from jobs.services.workloads import workload_cancel

pytestmark = pytest.mark.django_db


class _Late(SimulatedBackend):
    """The simulated cluster, reporting what it saw before the test changed the rows."""

    def __init__(self, reports: list[PodReport]) -> None:
        super().__init__(start_delay=30)
        self.reports = reports

    def observe(self, *, now: datetime) -> list[PodReport]:
        reports, self.reports = self.reports, []
        return reports


def _statuses(w: Workload) -> list[str]:
    return sorted(Pod.objects.filter(workload=w).values_list("status", flat=True))


def test_a_start_reported_after_a_cancel_leaves_the_pod_stopped(bob, submit, tick, clock) -> None:
    job = submit(bob, "young", replicas=2, gpus=8)
    tick()  # placed, pods Pending
    late = _Late([PodReport(p.pk, PodStatus.RUNNING) for p in job.pods.all()])
    workload_cancel(actor=bob, workload=job, now=clock.now())
    assert backend_sync(now=clock.now(), backend=late) == 0
    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    assert _statuses(job) == [PodStatus.STOPPED, PodStatus.STOPPED]
    assert not job.events.filter(kind=EventKind.STARTED).exists()


def test_a_failure_reported_after_a_scale_down_starts_no_replacement(
    service: Any, tick: Any, clock: Any
) -> None:
    service_scale(service=service, replicas=2, now=clock.now(), reason="busy")
    tick(30)
    tick(30)  # both replicas run
    service_scale(service=service, replicas=1, now=clock.now(), reason="quiet")
    tick()  # the cycle stops the newest replica
    (stopped,) = service.pods.filter(status=PodStatus.STOPPED)
    late = _Late([PodReport(stopped.pk, PodStatus.FAILED, 137, "Crashed with exit code 137")])
    live = set(service.pods.filter(status=PodStatus.RUNNING).values_list("pk", flat=True))
    assert backend_sync(now=clock.now(), backend=late) == 0
    stopped.refresh_from_db()
    assert stopped.status == PodStatus.STOPPED and stopped.exit_code is None
    assert set(service.pods.exclude(status=PodStatus.STOPPED).values_list("pk", flat=True)) == live


def test_a_success_reported_after_a_preemption_keeps_the_victim_requeued(
    bob, submit, service, tick, clock
) -> None:
    borrower = submit(bob, "borrower", replicas=12, idle_policy="acceptable")
    tick(30)
    assert Workload.objects.get(pk=borrower.pk).in_quota is False
    pods = list(borrower.pods.all())
    service_scale(service=service, replicas=8, now=clock.now(), reason="08:00")
    tick()  # the service takes its GPUs back from the borrower
    borrower.refresh_from_db()
    assert borrower.status == Status.REQUEUED
    late = _Late([PodReport(p.pk, PodStatus.SUCCEEDED, 0) for p in pods])
    assert backend_sync(now=clock.now(), backend=late) == 0
    borrower.refresh_from_db()
    assert borrower.status == Status.REQUEUED
    assert set(_statuses(borrower)) <= {PodStatus.PREEMPTED, PodStatus.PENDING}


def test_time_limits_never_stop_an_instance_twice(carol, demo, clock, tick) -> None:
    from jobs.services.workloads import Shape, instance_start

    ws = demo.workspaces["workspace_c"]
    notebook = instance_start(
        actor=carol,
        workspace=ws,
        quota=ws.quotas.get(),
        name="nb",
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        max_duration=3600,
        now=clock.now(),
    )
    tick(30)
    workload_cancel(actor=carol, workload=notebook, now=clock.now())
    clock.advance(7200)
    assert interactive_time_limits_enforce(now=clock.now()) == 0
    notebook.refresh_from_db()
    assert notebook.status == Status.STOPPED and notebook.status_reason == "Stopped by carol."


def test_every_writer_takes_the_write_lock(bob, submit, service, tick, clock, demo) -> None:
    """Each writer moves the version once or more; a submit alone does not."""
    job = submit(bob, "job", gpus=8)
    steps = {
        "cycle": lambda: tick(),
        "sync": lambda: backend_sync(now=clock.now()),
        "scale": lambda: service_scale(service=service, replicas=2, now=clock.now()),
        "time limits": lambda: interactive_time_limits_enforce(now=clock.now()),
        "cancel": lambda: workload_cancel(actor=bob, workload=job, now=clock.now()),
    }
    for name, step in steps.items():
        before = state_version()
        step()
        assert state_version() > before, name
    before = state_version()
    submit(bob, "another", gpus=8)
    assert state_version() == before
