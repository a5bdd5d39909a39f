"""`manage.py serve` picks its clock by backend; the server and the loop are stubbed (they would
run until Ctrl-C), everything before them is real."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from django.core.management import call_command

from console import clock
from console.clock import SimulatedClock, WallClock
from console.runner import Runner

pytestmark = pytest.mark.django_db


async def _no_serving(self: uvicorn.Server, sockets: Any = None) -> None:
    """uvicorn returns at once."""


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Runner]]:
    """Runners serve started; uvicorn returns at once."""
    runners: list[Runner] = []
    monkeypatch.setattr(Runner, "start", lambda self: runners.append(self))
    monkeypatch.setattr(Runner, "stop", lambda self: None)
    monkeypatch.setattr(uvicorn.Server, "serve", _no_serving)
    previous = clock.get_clock()
    yield runners
    clock.set_clock(previous)


def test_serve_runs_the_simulated_clock_with_demo_traffic(started: Any, demo: Any) -> None:
    call_command("serve", "--speed", "60")
    assert isinstance(clock.get_clock(), SimulatedClock)
    assert started[0].speed == 60
    assert any(type(task).__name__ == "DemoTraffic" for task in started[0].extra)


def test_serve_on_a_real_cluster_keeps_wall_time_and_adds_no_traffic(
    started: Any, settings: Any
) -> None:
    settings.TIDEPOOL_BACKEND = "kubernetes"
    call_command("serve")
    assert isinstance(clock.get_clock(), WallClock)
    assert started[0].speed == 1.0 and not started[0].extra
