"""The control loop under faults (issue 17): a worker killed mid-cycle, PostgreSQL restarted
during a burst of submits, beat restarted around a scaling rule's minute.

Nothing accepted may be lost, nothing refused may appear, and the invariants of
tests.distributed.invariants hold afterwards and (by the commit audit) at every commit.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection, transaction
from django.db.models import Count, Q
from rest_framework.test import APIClient

from console import clock
from console.demo import Demo
from jobs.choices import LIVE_POD_STATUSES, EventKind, PodStatus, Status
from jobs.models import ControlState, Pod, Workload, WorkloadEvent
from jobs.services.scaling import scaling_rule_create
from jobs.services.workloads import Shape, job_submit, service_create
from tests.servers import postgres_restart, postgres_stopped

from . import audit
from .conftest import WORKER_APP, CeleryProcesses, cycle_lock_holders
from .invariants import summary, violations

pytestmark = [pytest.mark.django_db(transaction=True)]

Eventually = Callable[..., Any]


def _assert_invariants() -> None:
    """Every invariant holds now and held at every audited commit."""
    found = violations() + audit.findings()
    assert not found, summary(found)


def _submit(demo: Demo, name: str, *, gpu: int = 1000, replicas: int = 1) -> Workload:
    """Bob submits a long training job to his quota (it runs until the test ends)."""
    ws = demo.workspaces["workspace_b"]
    return job_submit(
        actor=get_user_model().objects.get(username="bob"),
        workspace=ws,
        quota=ws.quotas.get(),
        name=name,
        shape=Shape(replicas=replicas, gpu=gpu),
        node_pools=[demo.node_pool],
    )


def _placed(ids: list[int]) -> bool:
    """Every one of these jobs is Running with all its replicas live."""
    live = Count("pods", filter=Q(pods__status__in=LIVE_POD_STATUSES))
    rows = Workload.objects.filter(pk__in=ids).annotate(live=live)
    found = list(rows.values_list("status", "replicas", "live"))
    return len(found) == len(ids) and all(
        status == Status.RUNNING and live == replicas for status, replicas, live in found
    )


# A worker killed inside the cycle's transaction ----------------------------------------------

SESSIONS = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"


def _sessions(application: str) -> list[int]:
    """Backends of one application (a worker's PGAPPNAME)."""
    with connection.cursor() as cursor:
        cursor.execute(SESSIONS, [application])
        return [row[0] for row in cursor.fetchall()]


def _cycle_lock_free() -> bool:
    """Nobody holds the cycle lock row: a cycle could take it now."""
    try:
        with transaction.atomic():
            ControlState.objects.select_for_update(nowait=True).get(pk=1)
    except OperationalError:
        return False
    return True


@contextmanager
def _rows_locked(ids: list[int]) -> Iterator[None]:
    """Hold these workload rows FOR UPDATE from another session until the block ends.

    A cycle that admits them must write them (or pods that refer to them) inside its
    transaction, so it waits there, holding the cycle lock, long enough to be caught.
    """
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(Workload.objects.select_for_update().filter(pk__in=ids))
                locked.set()
                release.wait(120)
        finally:
            connection.close()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert locked.wait(30), "could not lock the workload rows"
    try:
        yield
    finally:
        release.set()
        holder.join(30)


def test_a_worker_killed_inside_the_cycle_transaction_loses_nothing(
    demo: Demo, celery: CeleryProcesses, commit_audit: None, eventually: Eventually
) -> None:
    ControlState.objects.get_or_create(pk=1)
    # Submitted before any worker runs: the first worker's first cycle admits them all.
    ids = [_submit(demo, f"killed-{i}", gpu=1000 * (1 + i % 4)).pk for i in range(12)]
    with _rows_locked(ids):
        doomed = celery.worker()
        app = f"{WORKER_APP}{celery.workers_started}"
        eventually(
            lambda: cycle_lock_holders(app),
            what="the worker's cycle to take the cycle lock and wait inside its transaction",
        )
        assert not _cycle_lock_free()
        celery.kill(doomed, signal.SIGKILL)
    # PostgreSQL sees the dead connection close, rolls its transaction back, frees the lock.
    eventually(lambda: not _sessions(app), what="PostgreSQL to end the dead worker's session")
    assert _cycle_lock_free()
    assert Pod.objects.count() == 0, "the killed cycle's pods outlived its transaction"
    assert set(Workload.objects.filter(pk__in=ids).values_list("status", flat=True)) == {
        Status.QUEUED
    }

    celery.worker()
    celery.beat()
    eventually(lambda: _placed(ids), what="a fresh worker to admit and place every job")
    _assert_invariants()


# PostgreSQL restarted during a burst of submits ----------------------------------------------

BURST_CLIENTS = 4
BURST_SUBMITS = 25  # per client
RESTART_AFTER = 2.0  # seconds into the burst


@dataclass(frozen=True)
class Answer:
    """How one submit answered, and whether the restart was over by then."""

    code: int
    after_restart: bool


def _burst_client(number: int, answers: dict[str, Answer], restarted: threading.Event) -> None:
    """Submit jobs through the REST API one after another, noting how each answered."""
    # Server errors answer 500 rather than re-raise: the test client collects exceptions
    # through a process-wide signal, so a raising client would raise other threads' errors.
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(get_user_model().objects.get(username="bob"))
    try:
        for i in range(BURST_SUBMITS):
            name = f"burst-{number}-{i}"
            body = {"workspace": "workspace_b", "name": name, "gpu": 0.5, "replicas": 1}
            body["idle_policy"] = "acceptable"
            code = client.post("/api/v1/jobs/", body, format="json").status_code
            answers[name] = Answer(code, restarted.is_set())
            time.sleep(0.05)
    finally:
        connection.close()


def test_postgresql_restarted_during_submits_keeps_each_answer_true(
    demo: Demo, celery: CeleryProcesses, commit_audit: None, eventually: Eventually
) -> None:
    celery.worker()
    celery.beat()
    answers: dict[str, Answer] = {}
    restarted = threading.Event()
    clients = [
        threading.Thread(target=_burst_client, args=(i, answers, restarted))
        for i in range(BURST_CLIENTS)
    ]
    for thread in clients:
        thread.start()
    time.sleep(RESTART_AFTER)
    postgres_restart(Path(os.environ["TIDEPOOL_PGDATA"]))
    restarted.set()
    connection.close()  # this thread's session was cut too
    for thread in clients:
        thread.join(120)

    stored = set(Workload.objects.filter(name__startswith="burst-").values_list("name", flat=True))
    wrong = [
        f"{name}: answered {a.code} but {'exists' if name in stored else 'does not exist'}"
        for name, a in sorted(answers.items())
        if (200 <= a.code < 300) != (name in stored)
    ]
    assert not wrong, "\n".join(wrong)
    assert len(answers) == BURST_CLIENTS * BURST_SUBMITS
    codes = Counter((a.after_restart, a.code) for a in answers.values())
    # The burst straddled the restart, and submits work again once PostgreSQL is back.
    assert codes[False, 201] and codes[True, 201], codes
    ids = list(Workload.objects.filter(name__in=stored).values_list("pk", flat=True))
    eventually(lambda: _placed(ids), timeout=90, what="the control loop to place every job")
    _assert_invariants()


def test_while_postgresql_is_down_the_api_answers_503_json_with_retry_after(demo: Demo) -> None:
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(get_user_model().objects.get(username="bob"))
    with postgres_stopped(Path(os.environ["TIDEPOOL_PGDATA"])):
        connection.close()  # this thread's session was cut
        answer = client.get("/api/v1/jobs/")
        submitted = client.post(
            "/api/v1/jobs/", {"workspace": "workspace_b", "name": "in-outage", "gpu": 1}
        )
    connection.close()
    for response in (answer, submitted):
        assert response.status_code == 503
        assert response["Content-Type"] == "application/json"
        assert int(response["Retry-After"]) > 0
        assert "database" in response.json()["detail"]
    assert client.get("/api/v1/jobs/").status_code == 200  # back once PostgreSQL is


# Beat restarted around a scaling rule's minute -----------------------------------------------

LEAD = 6  # seconds: the rule's minute is at least this far off when it is created
DOWN_BEFORE = 3  # seconds before the minute beat is killed
UP_AFTER = 4  # seconds after the minute a new beat starts


def _sleep_until(when: datetime) -> None:
    """Wait for a wall-clock time."""
    time.sleep(max((when - datetime.now(UTC)).total_seconds(), 0))


def test_beat_restarted_around_a_rules_minute_fires_it_exactly_once(
    demo: Demo, celery: CeleryProcesses, eventually: Eventually
) -> None:
    celery.worker()
    beat = celery.beat()
    alice = get_user_model().objects.get(username="alice")
    service = service_create(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="api",
        shape=Shape(replicas=1, gpu=8000),
        node_pools=[demo.node_pool],
        min_replicas=1,
        max_replicas=4,
    )
    now = clock.now()
    minute = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    if (minute - now).total_seconds() < LEAD:
        minute += timedelta(minutes=1)
    rule = scaling_rule_create(
        service=service,
        name="at-the-minute",
        cron=f"{minute.minute} {minute.hour} * * *",  # once a day: at that minute only
        timezone="UTC",
        target_replicas=3,
        now=now,
    )
    _sleep_until(minute - timedelta(seconds=DOWN_BEFORE))
    celery.kill(beat, signal.SIGKILL)
    _sleep_until(minute + timedelta(seconds=UP_AFTER))
    celery.beat()

    eventually(
        lambda: Workload.objects.get(pk=service.pk).replicas == 3,
        what="the restarted beat to fire the rule it missed",
    )
    # Long enough for a duplicate tick of that minute (from either beat) to be applied.
    time.sleep(6)
    rule.refresh_from_db()
    assert rule.last_fired_at == minute
    scaled = WorkloadEvent.objects.filter(workload=service, kind=EventKind.SCALED)
    assert [e.data.get("after") for e in scaled] == [3]
    eventually(
        lambda: service.pods.filter(status__in=[PodStatus.PENDING, PodStatus.RUNNING]).count() == 3,
        what="the next cycle to place the new replicas",
    )
