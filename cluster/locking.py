"""The one write lock of the scheduling state (DESIGN §2, "Exactly once, for every writer").

Every writer of workloads, pods, quotas and nodes — the cycle's apply, backend sync, cancel,
stop, scale, time limits, fault handling, quota and node changes — calls `write_lock()` first
in its transaction, and reads what it will change only after it. The call bumps the single
`WriteLock` row, so the transaction holds that row until it ends: PostgreSQL's row lock, or
SQLite's write lock. Writers therefore apply one at a time, each to the state the previous one
committed, on either database; nothing leans on SQLite's single writer.

The version tells a scheduling cycle whether its plan is still good: a plan read from the state
at version v applies only when `write_lock()` returns v + 1 (nobody committed in between);
otherwise the cycle plans again under the lock. Submits take no lock: a new Queued workload
changes nothing another writer read, and a plan made without it is the plan of a cycle that ran
just before it.

Lock order: `write_lock()` comes before any other row lock in the same transaction (a quota's
resource pool, a scaling rule), so two writers can never wait on each other.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from cluster.models import WriteLock

ROW = 1


def write_lock() -> int:
    """Take the write lock for the rest of the current transaction; returns the new version."""
    assert transaction.get_connection().in_atomic_block, "write_lock() needs a transaction"
    if not WriteLock.objects.filter(pk=ROW).update(version=F("version") + 1):
        # The first writer of a new database: insert the row (a racing insert is ignored).
        WriteLock.objects.bulk_create([WriteLock(pk=ROW)], ignore_conflicts=True)
        WriteLock.objects.filter(pk=ROW).update(version=F("version") + 1)
    return int(WriteLock.objects.values_list("version", flat=True).get(pk=ROW))


def state_version() -> int:
    """The version of the committed state now (0 before the first write)."""
    version = WriteLock.objects.filter(pk=ROW).values_list("version", flat=True).first()
    return int(version or 0)
