"""The tidepool.report client: a real HTTP round trip, and nothing at all outside Tidepool."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from console.clock import ManualClock
from jobs.choices import Status
from jobs.models import Workload
from jobs.reports.buffer import BUFFER
from jobs.reports.tokens import report_token
from tidepool import report


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No Tidepool environment and an empty buffer unless a test sets them."""
    for name in ("TIDEPOOL_REPORT_URL", "TIDEPOOL_REPORT_TOKEN", "TIDEPOOL_RESUME_FROM"):
        monkeypatch.delenv(name, raising=False)
    BUFFER.drain()
    yield
    BUFFER.drain()


@pytest.fixture
def listener() -> Iterator[tuple[str, list[socket.socket]]]:
    """A TCP port that records every connection made to it (and answers nothing)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/api/v1/report/", accepted
    server.close()
    for conn in accepted:
        conn.close()


def until(condition: Callable[[], bool]) -> None:
    """Wait (up to 10 s) for another thread to make `condition` true."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.01)


def test_outside_tidepool_every_call_does_nothing(
    listener: tuple[str, list[socket.socket]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, accepted = listener
    monkeypatch.setenv("TIDEPOOL_REPORT_URL", url)  # a URL without a token is not Tidepool
    assert not report.enabled()
    assert report.progress(0.5) is False
    assert report.checkpoint("step-1") is False
    assert report.heartbeat() is False
    assert report.activity() is False
    with report.heartbeats(every=0.01):
        assert not any(t.name == "tidepool-heartbeats" for t in threading.enumerate())
    assert report.resume_from() is None
    assert accepted == []


def test_network_errors_never_reach_the_training_code(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    monkeypatch.setenv("TIDEPOOL_REPORT_URL", f"http://127.0.0.1:{port}/api/v1/report/")
    monkeypatch.setenv("TIDEPOOL_REPORT_TOKEN", "1.1.0.x")
    monkeypatch.setattr(report, "_failed", threading.Event())
    with caplog.at_level(logging.DEBUG, logger="tidepool.report"):
        assert report.heartbeat() is False
        assert report.progress(0.1) is False
    levels = [r.levelname for r in caplog.records]
    assert levels == ["WARNING", "DEBUG"]


def test_the_client_reports_over_http_to_the_console(
    live_server: Any,
    submit: Callable[..., Workload],
    alice: Any,
    tick: Callable[..., None],
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = submit(alice, "train", replicas=1, gpus=1, total_work=100.0)
    tick(0)
    tick(30)
    job.refresh_from_db()
    assert job.status == Status.RUNNING
    pod = job.pods.get()
    monkeypatch.setenv("TIDEPOOL_REPORT_URL", f"{live_server.url}/api/v1/report/")
    monkeypatch.setenv("TIDEPOOL_REPORT_TOKEN", report_token(pod))
    monkeypatch.setenv("TIDEPOOL_RESUME_FROM", "step-300")

    assert report.resume_from() == "step-300"
    before = BUFFER.received
    with report.heartbeats(every=60):
        until(lambda: BUFFER.received > before)  # the first heartbeat, sent from its thread
    assert report.progress(0.75) is True
    assert report.checkpoint(400) is True
    assert report.activity() is True
    assert report.progress(2) is False  # refused (400), logged, not raised
    BUFFER.flush()

    pod.refresh_from_db()
    job.refresh_from_db()
    assert pod.last_heartbeat_at == clock.now()
    assert pod.reported_progress == 0.75
    assert job.progress == 75.0
    assert (job.checkpoint_label, job.last_checkpoint_at) == ("400", clock.now())
    assert job.last_activity_at == clock.now()
