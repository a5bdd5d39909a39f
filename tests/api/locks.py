"""A stand-in for console.sqlite's writer lock that tells when someone starts waiting."""

from __future__ import annotations

import threading


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
