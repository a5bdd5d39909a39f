"""Ask for a scheduling cycle soon, after the current transaction commits."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import transaction

_listeners: list[Callable[[], None]] = []
_lock = threading.Lock()


def on_cycle_requested(listener: Callable[[], None]) -> None:
    """Register what runs a cycle soon (the embedded runner, or a Celery dispatch)."""
    with _lock:
        if listener not in _listeners:
            _listeners.append(listener)


def request_cycle() -> None:
    """Run a cycle soon after commit: a submit, cancel or scale need not wait for the timer."""

    def notify() -> None:
        for listener in list(_listeners):
            listener()

    transaction.on_commit(notify)
