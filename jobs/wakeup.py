"""Ask for a scheduling cycle soon, after the current transaction commits.

A wake-up is best effort. The change that asked for it is committed, so a listener that
fails (the broker is down) is logged, never raised into the request: beat's periodic cycle
(every 5 s) picks the change up once the broker is back.

Requests are merged, so a burst of submits cannot flood the broker and starve the periodic
tasks. The embedded runner merges them itself (its wake-up is a `threading.Event`). In the
distributed mode `cycle_queue` sends a Celery message only when it can add the key
`QUEUED_KEY` to the Django cache (Redis, shared by every web process and worker; `cache.add`
is `SET NX` with an expiry). The worker deletes the key as the cycle starts (`cycle_started`),
so requests that arrive during a cycle queue exactly one more, which reads their commits. The
key expires with the message (`QUEUED_SECONDS`): a message that expired unconsumed, or was
never sent, holds up later requests no longer than that, and beat covers the gap. Celery has no
means of its own to drop a message while an equal one is queued.

A cycle that placed pods asks, the same way, for a backend sync when the first of them is due
(`request_sync`): at once on Kubernetes, where the sync creates the pods, or when the simulated
cluster starts them. Beat's sync every 5 s would otherwise add up to 5 s before a job is seen
Running. Requests for the same second are merged (`sync_queue`); the embedded runner syncs
every tick anyway and registers no listener.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from django.core.cache import cache
from django.db import transaction

log = logging.getLogger(__name__)
_listeners: list[Callable[[], None]] = []
_sync_listeners: list[Callable[[datetime], None]] = []
_lock = threading.Lock()
QUEUED_KEY = "tidepool:cycle-queued"
# How long a queued cycle message lives; its key lives as long (beat's tasks expire alike).
QUEUED_SECONDS = 30


def on_cycle_requested(listener: Callable[[], None]) -> None:
    """Register what runs a cycle soon (the embedded runner, or `cycle_queue`)."""
    with _lock:
        if listener not in _listeners:
            _listeners.append(listener)


def on_sync_requested(listener: Callable[[datetime], None]) -> None:
    """Register what runs a backend sync at a given time (`sync_queue`)."""
    with _lock:
        if listener not in _sync_listeners:
            _sync_listeners.append(listener)


def request_sync(at: datetime) -> None:
    """Sync the backend at `at`, after commit: a pod placed now is created or starts then."""

    def notify() -> None:
        for listener in list(_sync_listeners):
            try:
                listener(at)
            except Exception:
                log.warning("sync wake-up failed; the periodic sync will catch up", exc_info=True)

    transaction.on_commit(notify)


def request_cycle() -> None:
    """Run a cycle soon after commit: a submit, cancel or scale need not wait for the timer."""
    transaction.on_commit(_notify)


def _notify() -> None:
    """Wake every listener; a failure is logged, and beat's timer catches up."""
    for listener in list(_listeners):
        try:
            listener()
        except Exception:
            log.warning("cycle wake-up failed; the periodic cycle will catch up", exc_info=True)


def cycle_queue() -> None:
    """Send one Celery cycle message unless one is queued already."""
    from jobs.tasks import scheduling_cycle

    if not cache.add(QUEUED_KEY, 1, timeout=QUEUED_SECONDS):
        return
    try:
        scheduling_cycle.apply_async(expires=QUEUED_SECONDS)
    except Exception:
        cache.delete(QUEUED_KEY)  # nothing is queued: let the next request try again
        raise


def cycle_started() -> None:
    """Let the next request queue a cycle: this one reads every commit made before now."""
    try:
        cache.delete(QUEUED_KEY)
    except Exception:
        # The key expires on its own; the cycle itself must still run.
        log.warning("could not clear the queued-cycle key", exc_info=True)


def sync_queue(at: datetime) -> None:
    """Send one Celery backend sync for `at`'s second unless one is queued for it already."""
    from console import clock
    from jobs.tasks import backend_sync

    ahead = max((at - clock.now()).total_seconds(), 0.0)
    key = f"tidepool:sync-queued:{int(at.timestamp())}"
    if not cache.add(key, 1, timeout=int(ahead) + QUEUED_SECONDS):
        return
    try:
        backend_sync.apply_async(countdown=ahead, expires=ahead + QUEUED_SECONDS)
    except Exception:
        cache.delete(key)
        raise
