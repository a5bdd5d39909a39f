"""Distributed-mode fixtures: a Celery worker and beat against the test PostgreSQL database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Collected only under `python -m tests.distributed`, which starts PostgreSQL and Redis.
if not os.environ.get("TIDEPOOL_DISTRIBUTED"):
    collect_ignore_glob = ["test_*.py"]


def _celery_env() -> dict[str, str]:
    """The environment of the worker and beat: the test database, the test Redis."""
    from django.db import connection

    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    return dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="console.settings.test")


def _start(*args: str, log: Path) -> subprocess.Popen[bytes]:
    """Start a Celery process with its output in a log file."""
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "console", *args],
        cwd=ROOT,
        env=_celery_env(),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def _stop(proc: subprocess.Popen[bytes], log: Path) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    if proc.returncode not in (0, -15):
        print(log.read_text()[-4000:])


@pytest.fixture
def worker(transactional_db: None, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real Celery worker process (solo pool) consuming from Redis."""
    log = tmp_path / "worker.log"
    proc = _start(
        "worker",
        "--pool=solo",
        "--loglevel=INFO",
        "--without-heartbeat",
        "--without-mingle",
        "--without-gossip",
        log=log,
    )
    yield proc
    _stop(proc, log)


@pytest.fixture
def beat(transactional_db: None, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real Celery beat process with django-celery-beat's database scheduler."""
    log = tmp_path / "beat.log"
    proc = _start(
        "beat",
        "--loglevel=INFO",
        "--max-interval=1",
        "--scheduler=django_celery_beat.schedulers:DatabaseScheduler",
        log=log,
    )
    yield proc
    _stop(proc, log)


@pytest.fixture
def eventually() -> Callable[..., Any]:
    """Poll a condition that another process makes true, failing after a deadline."""

    def wait(check: Callable[[], Any], *, timeout: float = 45, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")

    return wait
