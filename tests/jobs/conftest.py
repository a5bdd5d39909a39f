"""Control-loop fixtures: a manual clock, the simulated backend, and a tick helper."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from console import clock as clock_module
from console.clock import ManualClock
from jobs.backends import set_backend
from jobs.backends.simulated import SimulatedBackend
from jobs.models import Workload
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.sync import backend_sync
from jobs.services.workloads import Shape, job_submit, service_create

START = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> Iterator[ManualClock]:
    """A clock that moves only when the test says so."""
    manual = ManualClock(START)
    previous = clock_module.set_clock(manual)
    yield manual
    clock_module.set_clock(previous)


@pytest.fixture
def sim() -> Iterator[SimulatedBackend]:
    """The simulated cluster, pods starting 30 s after creation."""
    backend = SimulatedBackend(start_delay=30)
    set_backend(backend)
    yield backend
    set_backend(None)


@pytest.fixture
def tick(clock: ManualClock, sim: SimulatedBackend) -> Callable[..., None]:
    """Advance the clock, then sync the backend and run a cycle, as the runner does."""

    def advance(seconds: float = 0, *, cycles: int = 1) -> None:
        clock.advance(seconds)
        for _ in range(cycles):
            backend_sync(now=clock.now(), backend=sim)
            scheduling_cycle_run(now=clock.now(), backend=sim)

    return advance


@pytest.fixture
def submit(demo: Any, clock: ManualClock) -> Callable[..., Workload]:
    """Submit a training job as a team member into their workspace's quota."""

    def job(user: Any, name: str, *, replicas: int = 1, gpus: int = 8, **kwargs: Any) -> Workload:
        ws = user.memberships.get().workspace
        return job_submit(
            actor=user,
            workspace=ws,
            quota=ws.quotas.get(),
            name=name,
            shape=Shape(replicas=replicas, gpu=gpus * 1000, priority=kwargs.pop("priority", 5)),
            node_pools=[demo.node_pool],
            now=clock.now(),
            **kwargs,
        )

    return job


@pytest.fixture
def service(demo: Any, alice: Any, clock: ManualClock) -> Workload:
    """Team A's inference service in Quota 1: 8 GPUs a replica, 1 to 8 replicas."""
    return service_create(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="chat-api",
        shape=Shape(replicas=1, gpu=8000),
        node_pools=[demo.node_pool],
        min_replicas=1,
        max_replicas=8,
        now=clock.now(),
    )
