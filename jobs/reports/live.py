"""The replica attempts that were live at the last flush, so most reports need no read.

The flusher thread reads them (one query) after each flush. A report of an attempt in the set
is taken without a read of its own; any other report reads its attempt (``accept``). An
attempt that ended since the last read is taken for at most one flush interval more, and the
flush's conditional writes drop what it reported: nothing it says after its end is written.
Without the flusher thread (tests; TIDEPOOL_REPORT_FLUSH_SECONDS=0) the set stays empty and
every report reads its attempt.
"""

from __future__ import annotations

from jobs.choices import ACTIVE_STATUSES, LIVE_POD_STATUSES

# (pod id, workload id, attempt): what a token's claim names.
Attempt = tuple[int, int, int]

_live: frozenset[Attempt] = frozenset()


def known_live(attempt: Attempt) -> bool:
    """Whether the attempt was live at the last read."""
    return attempt in _live


def known_live_refresh() -> int:
    """Read the live attempts again; how many there are."""
    global _live
    from jobs.models import Pod  # here: console.serving imports this before apps load

    rows = Pod.objects.filter(
        status__in=LIVE_POD_STATUSES, workload__status__in=ACTIVE_STATUSES
    ).values_list("pk", "workload_id", "attempt")
    _live = frozenset(rows)
    return len(_live)
