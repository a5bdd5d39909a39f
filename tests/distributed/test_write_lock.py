"""On PostgreSQL, writers of the scheduling state wait for each other and act on what is there.

A writer holds the write lock in an open transaction (a cancel, a scale-down) while another
writer starts (a cycle that planned before it, a sync that read the cluster before it); the
second must wait for the first to commit and then apply only what still holds. Without the
one lock, the second's blind writes land after the first's commit: a cancelled job runs again,
a stopped pod turns Running.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection, transaction

from console import clock
from jobs.backends.simulated import SimulatedBackend
from jobs.choices import PodStatus, Status
from jobs.models import Workload
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.sync import backend_sync
from jobs.services.workloads import Shape, job_submit, workload_cancel

pytestmark = pytest.mark.django_db(transaction=True)


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run `work` in a thread with its own connection; its result or error lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as error:  # noqa: BLE001 - reported by the test
            out.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


@contextmanager
def _held(change: Callable[[], Any]) -> Iterator[None]:
    """`change` done in a transaction of another connection that commits when the block ends."""
    done, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            change()
            done.set()
            release.wait(30)

    thread, out = _in_thread(hold)
    assert done.wait(30), out
    try:
        yield
    finally:
        release.set()
        thread.join(30)
    assert not out or out == [None], out


def _waiting_for_a_lock() -> bool:
    """Some other connection of this database is waiting for a row lock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return bool(cursor.fetchone()[0])


def _submit(demo: Any, bob: Any, name: str) -> Workload:
    ws = demo.workspaces["workspace_b"]
    return job_submit(
        actor=bob,
        workspace=ws,
        quota=ws.quotas.get(),
        name=name,
        shape=Shape(replicas=2, gpu=8000),
        node_pools=[demo.node_pool],
    )


def _start_blocked(
    writer: Callable[[], Any], eventually: Any
) -> tuple[threading.Thread, list[Any]]:
    """Start `writer` in a thread and wait until it waits for a lock."""
    thread, out = _in_thread(writer)
    eventually(_waiting_for_a_lock, timeout=30, what="the writer to wait for the write lock")
    assert thread.is_alive() and not out, out
    return thread, out


def test_a_cycle_planned_before_a_cancel_never_runs_the_cancelled_job(
    demo: Any, bob: Any, eventually: Any
) -> None:
    job = _submit(demo, bob, "cancel-me")
    sim = SimulatedBackend(start_delay=0)
    with _held(lambda: workload_cancel(actor=bob, workload=job)):
        # The cycle plans now (the job is Queued as far as it can see), then must wait.
        thread, out = _start_blocked(
            lambda: scheduling_cycle_run(now=clock.now(), backend=sim), eventually
        )
    thread.join(60)
    assert out and out[0].ran, out
    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    assert not job.pods.exists()


def test_a_sync_that_read_the_cluster_before_a_cancel_never_revives_its_pods(
    demo: Any, bob: Any, eventually: Any
) -> None:
    job = _submit(demo, bob, "young")
    sim = SimulatedBackend(start_delay=0)
    scheduling_cycle_run(now=clock.now(), backend=sim)
    assert set(job.pods.values_list("status", flat=True)) == {PodStatus.PENDING}

    class _ReadEarly(SimulatedBackend):
        """Reports what the cluster showed before the cancel: both pods started."""

        def observe(self, *, now: Any) -> Any:
            return self.seen

    early = _ReadEarly(start_delay=0)
    early.seen = sim.observe(now=clock.now())
    assert len(early.seen) == 2
    with _held(lambda: workload_cancel(actor=bob, workload=job)):
        thread, out = _start_blocked(
            lambda: backend_sync(now=clock.now(), backend=early), eventually
        )
    thread.join(60)
    assert out == [0], out
    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    assert set(job.pods.values_list("status", flat=True)) == {PodStatus.STOPPED}


def test_a_cancel_waits_for_a_cycle_and_ends_what_the_cycle_started(
    demo: Any, bob: Any, eventually: Any
) -> None:
    job = _submit(demo, bob, "placed-then-cancelled")
    sim = SimulatedBackend(start_delay=0)
    with _held(lambda: scheduling_cycle_run(now=clock.now(), backend=sim)):
        thread, out = _start_blocked(lambda: workload_cancel(actor=bob, workload=job), eventually)
    thread.join(60)
    assert isinstance(out[0], Workload), out
    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    assert set(job.pods.values_list("status", flat=True)) == {PodStatus.STOPPED}
