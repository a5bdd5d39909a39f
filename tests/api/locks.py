"""A stand-in for console.fast.sqlite's writer lock that tells when someone starts waiting."""

from __future__ import annotations

import threading

import pytest
from django.conf import settings

# The writer queue is the speed layer's SQLite backend: with TIDEPOOL_FAST_PATHS off, Django's
# own backend serves and there is no process lock to watch.
queued_writers = pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "console.fast.sqlite",
    reason="the embedded mode's queued writers (TIDEPOOL_FAST_PATHS=1)",
)


class WatchedLock:
    """The writer lock, telling when someone starts waiting for it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting = threading.Event()

    def acquire(self, timeout: float = -1) -> bool:
        if self.lock.locked():
            self.waiting.set()
        return self.lock.acquire(timeout=timeout)

    def release(self) -> None:
        self.lock.release()

    def locked(self) -> bool:
        return self.lock.locked()
