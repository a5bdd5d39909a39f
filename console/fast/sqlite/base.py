"""SQLite for the embedded mode: a transaction waits for the write lock on a process lock.

Every transaction begins IMMEDIATE (it takes SQLite's write lock up front). When the lock is
held, SQLite's busy handler sleeps and retries with back-off up to 100 ms a try, so a writer
can lose to newer ones again and again: under 20 concurrent submits and the control loop,
some waited seconds. In the embedded mode every writer lives in this one process, so they
queue here first and each starts the moment the previous one ends. Another process (a
management command) still meets SQLite's own lock and busy timeout.
"""

from __future__ import annotations

import threading

from django.db.backends.sqlite3 import base

_writer = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    """SQLite whose transactions take the process's writer lock for their whole length."""

    _holds_writer = False

    def _start_transaction_under_autocommit(self) -> None:
        """Wait for the writer lock, then BEGIN (IMMEDIATE).

        Past the busy timeout the transaction goes on without it and meets SQLite's lock as
        before (so a thread that waits on the holder itself fails instead of hanging).
        """
        timeout = float(self.settings_dict["OPTIONS"].get("timeout", 5))
        self._holds_writer = _writer.acquire(timeout=timeout)
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # private in the stubs
        except BaseException:
            self._release_writer()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]  # private in the stubs
        finally:
            self._release_writer()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # private in the stubs
        finally:
            self._release_writer()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]  # private in the stubs
        finally:
            self._release_writer()

    def _release_writer(self) -> None:
        """Let the next writer in (once per transaction)."""
        if self._holds_writer:
            self._holds_writer = False
            _writer.release()
