"""Backend sync: pod reports become replica and workload state, in the order they came."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from jobs.backends.base import PodReport
from jobs.backends.simulated import SimulatedBackend
from jobs.choices import EventKind, PodStatus, Status
from jobs.models import Workload
from jobs.services.sync import backend_sync

pytestmark = pytest.mark.django_db


class _Reporting(SimulatedBackend):
    """The simulated cluster, reporting what the test hands it instead of what it sees."""

    def __init__(self) -> None:
        super().__init__(start_delay=30)
        self.reports: list[PodReport] = []

    def observe(self, *, now: datetime) -> list[PodReport]:
        reports, self.reports = self.reports, []
        return reports


def _started(job: Workload) -> int:
    return job.events.filter(kind=EventKind.STARTED).count()


def test_a_job_starts_its_clock_once_every_replica_runs(bob, submit, tick, clock) -> None:
    jobs = [submit(bob, name, replicas=2, gpus=4) for name in ("pair", "other")]
    tick()
    pair, other = jobs
    late = pair.pods.order_by("index").last()
    late.start_after = clock.now() + timedelta(seconds=90)
    late.save(update_fields=["start_after"])
    tick(30)  # both pods of "other" start, one of "pair"
    pair.refresh_from_db()
    other.refresh_from_db()
    assert sorted(pair.pods.values_list("status", flat=True)) == [
        PodStatus.PENDING,
        PodStatus.RUNNING,
    ]
    assert (_started(pair), _started(other)) == (0, 1)
    assert other.last_progress_at == clock.now() and pair.last_progress_at != clock.now()
    tick(60)
    pair.refresh_from_db()
    assert _started(pair) == 1 and pair.last_progress_at == clock.now()
    assert _started(other) == 1


def test_a_start_reported_before_a_crash_of_the_same_job_is_stopped_by_its_restart(
    bob: Any, submit: Any, clock: Any, tick: Any
) -> None:
    job = submit(bob, "flaky", replicas=2, gpus=4)
    tick()
    first, second = job.pods.order_by("index")
    backend = _Reporting()
    backend.reports = [
        PodReport(first.pk, PodStatus.RUNNING),
        PodReport(second.pk, PodStatus.FAILED, 137, "Crashed with exit code 137"),
    ]
    assert backend_sync(now=clock.now(), backend=backend) == 2
    job.refresh_from_db()
    first.refresh_from_db()
    assert job.status == Status.REQUEUED and job.failures == 1
    assert first.status == PodStatus.STOPPED and first.started_at == clock.now()
    assert _started(job) == 0
