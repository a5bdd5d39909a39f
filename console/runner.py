"""The embedded control loop: the same task functions Celery beat would run, in a thread.

Intervals in jobs.tasks.SCHEDULE are simulated seconds; at SIM_SPEED 144 a 60 s sample
interval is under half a real second, so each task runs at most every MIN_REAL_INTERVAL.
A submit, cancel or scale wakes the loop (jobs.wakeup): the cycle runs at once, or, when one
ran less than MIN_REAL_INTERVAL ago, as soon as that floor has passed, so a burst of submits
is served by one cycle instead of a cycle each (each holding the write lock and the GIL).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections, connection

from jobs import tasks
from jobs.wakeup import on_cycle_requested
from quotas import tasks as quota_tasks

log = logging.getLogger(__name__)
MIN_REAL_INTERVAL = 0.4

TASKS: dict[str, Callable[[], object]] = {
    "jobs.tasks.backend_sync": tasks.backend_sync,
    "jobs.tasks.scaling_rules_due": tasks.scaling_rules_due,
    "quotas.tasks.calendar_rules_due": quota_tasks.calendar_rules_due,
    "jobs.tasks.time_limits": tasks.time_limits,
    "jobs.tasks.scheduling_cycle": tasks.scheduling_cycle,
    "jobs.tasks.usage_sample": tasks.usage_sample,
}


class Runner(threading.Thread):
    """Run each control-loop task on its interval until stopped."""

    def __init__(self, *, speed: float, extra: list[Callable[[], object]] | None = None) -> None:
        super().__init__(name="tidepool-runner", daemon=True)
        self.speed = max(speed, 1e-6)
        self.extra = extra or []
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.last_run: dict[str, float] = {}

    def interval(self, name: str) -> float:
        """Real seconds between two runs of a task."""
        return max(tasks.SCHEDULE[name] / self.speed, MIN_REAL_INTERVAL)

    def forced_cycle_delay(self, now: float) -> float:
        """Real seconds a requested cycle waits: none once MIN_REAL_INTERVAL has passed."""
        last = self.last_run.get("jobs.tasks.scheduling_cycle", -1e9)
        return max(0.0, last + MIN_REAL_INTERVAL - now)

    def tick(self, *, force_cycle: bool = False) -> None:
        """Run every task that is due (in the order beat's intervals make natural)."""
        for job in self.extra:
            self._call("extra", job)
        now = time.monotonic()
        for name, task in TASKS.items():
            forced = force_cycle and name in {
                "jobs.tasks.backend_sync",
                "jobs.tasks.scheduling_cycle",
            }
            if forced or now - self.last_run.get(name, -1e9) >= self.interval(name):
                self.last_run[name] = now
                self._call(name, task)

    def _call(self, name: str, task: Callable[[], object]) -> None:
        """Run one task; a failure is logged and retried on the next tick."""
        close_old_connections()
        try:
            task()
        except Exception:
            log.exception("control-loop task %s failed; retrying next tick", name)

    def run(self) -> None:
        """Loop until stop(), then close this thread's database connection."""
        on_cycle_requested(self.wake.set)
        try:
            while not self.stopped.is_set():
                woke = self.wake.wait(MIN_REAL_INTERVAL)
                if woke:
                    self.stopped.wait(self.forced_cycle_delay(time.monotonic()))
                self.wake.clear()
                self.tick(force_cycle=woke)
        finally:
            connection.close()

    def stop(self, *, wait: float = 60) -> None:
        """End the loop once the task it is running returns (waiting up to `wait` seconds)."""
        self.stopped.set()
        self.wake.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(wait)
