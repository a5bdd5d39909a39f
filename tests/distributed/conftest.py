"""Distributed-mode fixtures: Celery workers and beat against the test PostgreSQL database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Each worker's database connections carry this name plus its number (libpq's PGAPPNAME), so
# a test can tell from pg_stat_activity which process holds what.
WORKER_APP = "tidepool-worker"

# Collected only under `python -m tests.distributed`, which starts PostgreSQL and Redis.
if not os.environ.get("TIDEPOOL_DISTRIBUTED"):
    collect_ignore_glob = ["test_*.py"]


def _celery_env() -> dict[str, str]:
    """The environment of the worker and beat: the test database, the test Redis."""
    from django.db import connection

    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    return dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="console.settings.test")


def _start(*args: str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a Celery process on the test database, with its output in a log file."""
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "console", *args],
        cwd=ROOT,
        env={**_celery_env(), **(env or {})},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def _stop(popen: subprocess.Popen[bytes], log: Path) -> None:
    """Ask the process to finish (warm shutdown); kill it if it takes too long."""
    if popen.poll() is not None:
        return
    popen.terminate()
    try:
        popen.wait(timeout=20)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait(timeout=10)


@dataclass
class Process:
    """A Celery process the test started, with its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        """Its operating-system process id."""
        return self.popen.pid

    def tail(self, chars: int = 6000) -> str:
        """The end of its log."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-chars:]


@dataclass
class CeleryProcesses:
    """Start Celery workers and beat on demand; stop or kill them; show their logs."""

    logs: Path
    env: dict[str, str] = field(default_factory=dict)
    started: list[Process] = field(default_factory=list)
    workers_started: int = 0

    def _start(self, name: str, args: list[str], env: dict[str, str]) -> Process:
        log = self.logs / f"{name}-{len(self.started)}.log"
        process = Process(name, _start(*args, log=log, env={**self.env, **env}), log)
        self.started.append(process)
        return process

    def worker(self, **env: str) -> Process:
        """A real Celery worker process (solo pool) consuming from Redis; `env` overrides."""
        self.workers_started += 1
        name = f"worker{self.workers_started}"
        return self._start(
            name,
            [
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                f"--hostname={name}@%h",
                "--without-heartbeat",
                "--without-mingle",
                "--without-gossip",
            ],
            {"PGAPPNAME": f"{WORKER_APP}{self.workers_started}", **env},
        )

    def beat(self, **env: str) -> Process:
        """A real Celery beat process with django-celery-beat's database scheduler."""
        return self._start(
            "beat",
            [
                "beat",
                "--loglevel=INFO",
                "--max-interval=1",
                "--scheduler=django_celery_beat.schedulers:DatabaseScheduler",
            ],
            {"PGAPPNAME": "tidepool-beat", **env},
        )

    def kill(self, process: Process, sig: int = signal.SIGKILL) -> None:
        """Send a signal and wait for the process to end."""
        process.popen.send_signal(sig)
        process.popen.wait(timeout=30)

    def stop(self, process: Process) -> None:
        """Ask the process to finish (warm shutdown); kill it if it takes too long."""
        _stop(process.popen, process.log)

    def stop_all(self) -> None:
        """Stop every process still running, beat first (it queues work for the workers)."""
        for process in sorted(self.started, key=lambda p: p.name != "beat"):
            self.stop(process)

    def report(self) -> str:
        """The end of every process's log, for a failed test's output."""
        return "\n".join(
            f"----- {p.name} (pid {p.pid}, exit {p.popen.returncode}) -----\n{p.tail()}"
            for p in self.started
        )


# SELECT ... FOR UPDATE on the cycle lock's row (jobs_controlstate) takes RowShareLock on its
# table until the transaction ends: a worker's session holding it is inside a cycle. (An
# advisory lock would do as well, should the cycle lock become one.)
CYCLE_LOCK_HOLDERS = """
SELECT DISTINCT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.granted AND a.application_name LIKE %s AND a.xact_start IS NOT NULL
   AND (l.locktype = 'advisory'
        OR (l.relation = 'jobs_controlstate'::regclass AND l.mode = 'RowShareLock'))
"""


def cycle_lock_holders(application: str = WORKER_APP) -> list[int]:
    """Backends of workers (PGAPPNAME starting so) inside a cycle's transaction right now."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(CYCLE_LOCK_HOLDERS, [application + "%"])
        return [row[0] for row in cursor.fetchall()]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the test item, so fixtures know whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    """The test's setup or call failed."""
    return any(
        getattr(getattr(request.node, f"report_{when}", None), "failed", False)
        for when in ("setup", "call")
    )


@pytest.fixture
def celery(
    transactional_db: None, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[CeleryProcesses]:
    """Celery processes for the test; all stopped after it, their logs shown if it failed."""
    from django.core.cache import cache

    from console.celery import app
    from jobs.wakeup import QUEUED_KEY

    # Cycle requests an earlier test left in the queue go, and with them the mark that one is
    # queued (else the next request would not be sent while the mark lasts).
    app.control.purge()
    cache.delete(QUEUED_KEY)
    processes = CeleryProcesses(tmp_path)
    try:
        yield processes
    finally:
        processes.stop_all()
        crashed = [p for p in processes.started if p.popen.returncode not in (0, -15, -9)]
        if _failed(request) or crashed:
            print(processes.report())


@pytest.fixture
def worker(celery: CeleryProcesses) -> subprocess.Popen[bytes]:
    """A real Celery worker process (solo pool) consuming from Redis."""
    return celery.worker().popen


@pytest.fixture
def beat(celery: CeleryProcesses) -> subprocess.Popen[bytes]:
    """A real Celery beat process with django-celery-beat's database scheduler."""
    return celery.beat().popen


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


@pytest.fixture
def commit_audit(celery: CeleryProcesses) -> Iterator[None]:
    """The trigger-based audit of every commit (tests.distributed.audit), dropped after.

    The Celery processes stop first: dropping a trigger waits for every transaction on its
    table, and theirs would deadlock with it.
    """
    from . import audit

    audit.install()
    try:
        yield
    finally:
        celery.stop_all()
        audit.uninstall()
