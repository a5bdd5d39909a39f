"""The reports of this process, kept last-value-wins per replica until the next flush.

A report costs a dictionary update under a lock: the database sees a replica at most once
per flush, whatever the rate it reports at. Each signal keeps the time it was reported, so
the flush writes that time, not its own. A flusher thread (started with the first report,
``TIDEPOOL_REPORT_FLUSH_SECONDS``; 0 leaves flushing to the caller, as tests do) writes the
buffer through ``flush.reports_flush``; what a failed flush held is merged back and retried.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections

from console.metrics import REPORT_FLUSH_DURATION, REPORTS, timed
from jobs.reports.body import Report

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pending:
    """The latest of each signal one replica attempt reported since the last flush."""

    workload: int
    progress: float | None = None
    progress_at: datetime | None = None
    heartbeat_at: datetime | None = None  # a heartbeat's or a progress report's time
    checkpoint: str | None = None
    checkpoint_at: datetime | None = None
    activity_at: datetime | None = None

    def add(self, report: Report, at: datetime) -> Pending:
        """This entry with one more report (made at `at`) on top."""
        new = self
        if report.progress is not None:
            new = replace(new, progress=report.progress, progress_at=at)
        if report.heartbeat or report.progress is not None:
            new = replace(new, heartbeat_at=at)
        if report.checkpoint is not None:
            new = replace(new, checkpoint=report.checkpoint, checkpoint_at=at)
        if report.activity:
            new = replace(new, activity_at=at)
        return new

    def merge(self, newer: Pending) -> Pending:
        """This entry with a later one's signals over it (signal by signal, latest wins)."""
        new = self
        if newer.progress_at is not None and _later(newer.progress_at, new.progress_at):
            new = replace(new, progress=newer.progress, progress_at=newer.progress_at)
        if newer.heartbeat_at is not None and _later(newer.heartbeat_at, new.heartbeat_at):
            new = replace(new, heartbeat_at=newer.heartbeat_at)
        if newer.checkpoint_at is not None and _later(newer.checkpoint_at, new.checkpoint_at):
            new = replace(new, checkpoint=newer.checkpoint, checkpoint_at=newer.checkpoint_at)
        if newer.activity_at is not None and _later(newer.activity_at, new.activity_at):
            new = replace(new, activity_at=newer.activity_at)
        return new


def _later(a: datetime, b: datetime | None) -> bool:
    """Whether `a` comes at or after `b` (anything comes after nothing)."""
    return b is None or a >= b


class ReportBuffer:
    """Pending reports by pod id, shared by this process's request threads."""

    def __init__(self) -> None:
        self._pending: dict[int, Pending] = {}
        self._lock = threading.Lock()
        self._flusher: threading.Thread | None = None
        self.received = 0  # reports taken since the process started

    def add(self, *, pod: int, workload: int, report: Report, at: datetime) -> None:
        """Keep one report of a replica attempt until the next flush."""
        with self._lock:
            self._pending[pod] = self._pending.get(pod, Pending(workload=workload)).add(report, at)
            self.received += 1
            if self._flusher is None:
                self._start_flusher()
        REPORTS.inc()

    def drain(self) -> dict[int, Pending]:
        """Everything pending, which the buffer forgets."""
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending

    def restore(self, pending: dict[int, Pending]) -> None:
        """Take back what a failed flush drained, under anything reported since."""
        with self._lock:
            for pod, entry in pending.items():
                later = self._pending.get(pod)
                self._pending[pod] = entry if later is None else entry.merge(later)

    def __len__(self) -> int:
        return len(self._pending)

    def _start_flusher(self) -> None:
        """Start the flusher thread (under the lock), unless flushing is the caller's."""
        every = float(settings.TIDEPOOL_REPORT_FLUSH_SECONDS)
        if every <= 0:
            return
        self._flusher = threading.Thread(
            target=self._flush_forever, args=(every,), name="tidepool-reports", daemon=True
        )
        self._flusher.start()

    def _flush_forever(self, every: float) -> None:
        """Flush every `every` seconds for the life of the process, then read which
        attempts are live (jobs.reports.live)."""
        from jobs.reports.live import known_live_refresh

        stop = threading.Event()
        while not stop.wait(every):
            close_old_connections()  # as a request does: a broken or expired one is replaced
            self.flush()
            try:
                known_live_refresh()
            except Exception:
                log.exception("reading the live attempts failed; every report reads its own")
            close_old_connections()  # a pooled connection goes back until the next flush

    def flush(self) -> int:
        """Write what is pending now; the number of replicas written."""
        from jobs.reports.flush import reports_flush

        pending = self.drain()
        if not pending:
            return 0
        try:
            with timed(REPORT_FLUSH_DURATION):
                return reports_flush(pending=pending).pods
        except Exception:
            log.exception("writing %d replicas' reports failed; retrying", len(pending))
            self.restore(pending)
            return 0


BUFFER = ReportBuffer()
