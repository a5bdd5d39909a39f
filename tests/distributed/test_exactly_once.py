"""The control loop stays exactly-once under concurrency (issue 17): no fault, only a race.

Two Celery workers and beat run the control loop on the demo cluster (16 nodes x 8 GPUs)
with the simulated backend, while client threads submit short training jobs and another
cancels young ones, as an operator's users would. Afterwards the database must show every
invariant of DESIGN.md section 2 holding, and the commit audit must show that no committed
state in between broke one either.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count

from cluster.models import Node
from console import clock
from console.demo import Demo
from console.errors import DomainError
from jobs.choices import IdlePolicy, PodStatus, Status
from jobs.models import Pod, Workload
from jobs.services.workloads import Shape, job_submit, workload_cancel

from . import audit
from .conftest import CeleryProcesses, cycle_lock_holders
from .invariants import Cancel, Violation, last_pod_id, summary, violations

pytestmark = [pytest.mark.django_db(transaction=True)]

TEAMS = (("alice", "workspace_a"), ("bob", "workspace_b"), ("carol", "workspace_c"))
GPU_CHOICES = (500, 1000, 1000, 2000, 4000, 8000)  # milli-GPU per replica
START_DELAY = "1"  # seconds from placement to start on the simulated backend
SETTLE = 6.0  # seconds after the last submit for one more sync and cycle from beat


@dataclass(frozen=True)
class Pace:
    """How one run pushes: submit clients and their interval, how often and how soon to cancel.

    A cancel picks a job submitted at most `cancel_within` seconds ago: still Queued, or
    just placed by a cycle that may be planning it right now.
    """

    seed: int
    clients: int
    submit_every: float
    cancel_every: float
    cancel_within: float
    seconds: float
    in_cycle: float = 0.0  # the share of cancels that wait for a worker to be inside a cycle


# The reporter's pace (6 clients 0.5 s apart, a cancel every 0.3 s) sends more cycle requests
# than two workers on CI's two cores drain: backend_sync waits behind them, so pods seldom
# start or finish within a short run, and the races that need them (sync against a cycle or
# a cancel) hardly happen. A few submits a second keep the loop busy but moving.
PACES = [
    # A cancel every 0.5 s, of a job submitted up to 1 s before; half of them inside a cycle.
    Pace(
        seed=1,
        clients=3,
        submit_every=1.0,
        cancel_every=0.5,
        cancel_within=1.0,
        seconds=30,
        in_cycle=0.5,
    ),
    # Every cancel lands while a worker is inside a cycle's transaction.
    Pace(
        seed=2,
        clients=4,
        submit_every=1.0,
        cancel_every=0.3,
        cancel_within=0.75,
        seconds=25,
        in_cycle=1.0,
    ),
    # Faster clients, and cancels of jobs submitted at most 0.5 s before, inside a cycle.
    Pace(
        seed=3,
        clients=2,
        submit_every=0.5,
        cancel_every=0.25,
        cancel_within=0.5,
        seconds=25,
        in_cycle=1.0,
    ),
]


@dataclass
class Load:
    """What the client threads did: submitted jobs, cancels that answered, errors."""

    submitted: list[tuple[int, float]] = field(default_factory=list)  # (workload id, when)
    cancels: list[Cancel] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def young(self, within: float) -> list[int]:
        """Jobs submitted at most `within` seconds ago and not cancelled yet."""
        now = time.monotonic()
        with self.lock:
            cancelled = {c.workload_id for c in self.cancels}
            return [pk for pk, at in self.submitted if now - at <= within and pk not in cancelled]


def _client(target: Callable[[], None], load: Load) -> threading.Thread:
    """A thread that runs `target`, records what it raised and closes its connection."""

    def run() -> None:
        try:
            target()
        except Exception:  # the test reports it with the rest
            with load.lock:
                load.errors.append(traceback.format_exc(limit=4))
        finally:
            connection.close()

    return threading.Thread(target=run, daemon=True)


def _submitter(demo: Demo, pace: Pace, number: int, load: Load) -> Callable[[], None]:
    """A client that submits a short training job every `submit_every` seconds."""
    rng = random.Random(pace.seed * 1000 + number)
    users = get_user_model()
    teams = [(users.objects.get(username=u), demo.workspaces[ws]) for u, ws in TEAMS]
    quotas = {ws.pk: ws.quotas.get() for _, ws in teams}

    def run() -> None:
        count = 0
        while not load.stop.is_set():
            user, ws = rng.choice(teams)
            gpu = rng.choice(GPU_CHOICES)
            replicas = rng.randint(1, 3)
            count += 1
            job = job_submit(
                actor=user,
                workspace=ws,
                quota=quotas[ws.pk],
                name=f"race-{pace.seed}-{number}-{count}",
                shape=Shape(
                    replicas=replicas,
                    gpu=gpu,
                    cpu=gpu * 16,  # 8 GPUs take a node's 128 cores
                    memory=gpu * 64,
                    priority=rng.randint(1, 9),
                ),
                node_pools=[demo.node_pool],
                idle_policy=rng.choice([IdlePolicy.NONE, IdlePolicy.ACCEPTABLE]),
                # 2-10 s of work once every replica runs: some finish during the run
                total_work=replicas * gpu / 1000 * rng.uniform(2, 10),
                checkpoint_interval=60,
            )
            with load.lock:
                load.submitted.append((job.pk, time.monotonic()))
            load.stop.wait(pace.submit_every * rng.uniform(0.5, 1.5))

    return run


def _wait_for_a_cycle(stop: threading.Event, *, longest: float = 1.0) -> None:
    """Return when a worker holds the cycle lock, or after `longest` seconds."""
    deadline = time.monotonic() + longest
    while not cycle_lock_holders() and time.monotonic() < deadline and not stop.wait(0.01):
        pass


def _canceller(pace: Pace, load: Load) -> Callable[[], None]:
    """A client that cancels a young job every `cancel_every` seconds, as its owner."""
    rng = random.Random(pace.seed)

    def run() -> None:
        while not load.stop.wait(pace.cancel_every):
            if rng.random() < pace.in_cycle:
                _wait_for_a_cycle(load.stop)
            young = load.young(pace.cancel_within)
            if not young:
                continue
            job = Workload.objects.select_related("owner").get(pk=rng.choice(young))
            try:
                workload_cancel(actor=job.owner, workload=job)
            except DomainError:
                continue  # it ended first: nothing was promised
            cancel = Cancel(job.pk, last_pod_id())
            with load.lock:
                load.cancels.append(cancel)

    return run


def _race(demo: Demo, pace: Pace) -> Load:
    """Run the clients for `pace.seconds`, then stop them."""
    load = Load()
    threads = [_client(_submitter(demo, pace, i, load), load) for i in range(pace.clients)]
    threads.append(_client(_canceller(pace, load), load))
    for thread in threads:
        thread.start()
    time.sleep(pace.seconds)
    load.stop.set()
    for thread in threads:
        thread.join(timeout=60)
    return load


def _outcome(load: Load) -> dict[str, Any]:
    """What the run amounted to, for the failure message and the sanity checks."""
    ids = [pk for pk, _ in load.submitted]
    statuses = dict(
        Workload.objects.filter(pk__in=ids)
        .values("status")
        .annotate(n=Count("pk"))
        .values_list("status", "n")
    )
    return {"submitted": len(ids), "cancels answered": len(load.cancels), **statuses}


@pytest.mark.parametrize("pace", PACES, ids=[f"seed{p.seed}" for p in PACES])
def test_submits_and_cancels_racing_the_control_loop_break_no_invariant(
    demo: Demo, celery: CeleryProcesses, commit_audit: None, pace: Pace
) -> None:
    for _ in range(2):
        celery.worker(SIM_START_DELAY=START_DELAY)
    celery.beat()
    load = _race(demo, pace)
    time.sleep(SETTLE)
    celery.stop_all()

    outcome = _outcome(load)
    found: list[Violation] = [Violation("client error", e) for e in load.errors]
    found += violations(cancels=load.cancels)
    found += audit.findings()
    assert not found, f"{outcome}\n{summary(found)}"
    # A run that admitted, finished and cancelled nothing would prove nothing.
    assert outcome.get(Status.SUCCEEDED) and load.cancels, outcome


def test_the_audit_and_the_checker_report_what_a_blind_writer_breaks(
    demo: Demo, commit_audit: None
) -> None:
    """The race test's instruments, on writes made by hand: each broken rule is reported."""
    bob = get_user_model().objects.get(username="bob")
    ws = demo.workspaces["workspace_b"]
    job = job_submit(
        actor=bob,
        workspace=ws,
        quota=ws.quotas.get(),
        name="blind",
        shape=Shape(replicas=2, gpu=8000),
        node_pools=[demo.node_pool],
    )
    node = Node.objects.get(name="a100-01")
    now = clock.now()
    with transaction.atomic():  # two replicas on one node's eight GPUs, placed twice
        for index in range(3):
            Pod.objects.create(
                workload=job, index=index, node=node, devices=list(range(8)), created_at=now
            )
        Workload.objects.filter(pk=job.pk).update(status=Status.RUNNING)
    pod = Pod.objects.filter(workload=job).first()
    assert pod is not None
    workload_cancel(actor=bob, workload=job)
    cancel = Cancel(job.pk, last_pod_id())
    Pod.objects.filter(pk=pod.pk).update(status=PodStatus.RUNNING)  # a stopped pod revived
    Workload.objects.filter(pk=job.pk).update(status=Status.RUNNING)  # the cancel undone
    Pod.objects.create(workload=job, index=3, node=node, devices=[0], created_at=now)

    rules = {v.rule for v in violations(cancels=[cancel]) + audit.findings()}
    assert rules >= {
        "node gpu over capacity",
        "GPU device over capacity",
        "pod status moved backwards",
        "cancel undone",
        "pod created after a cancel",
        "attempt placed more than once",
        "at commit: node gpu over capacity",
        "at commit: GPU device over capacity",
        "at commit: pod status moved backwards",
        "at commit: ended workload changed status",
    }, rules
    Workload.objects.filter(pk=job.pk).update(status=Status.SUCCEEDED)  # pods still live
    rules = {v.rule for v in violations() + audit.findings()}
    assert {"live pod of an ended workload", "at commit: live pod of an ended workload"} <= rules
