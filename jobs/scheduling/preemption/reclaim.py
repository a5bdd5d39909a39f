"""Reclaim: an In-Quota-entitled workload evicts Not-in-Quota workloads on its capacity."""

from __future__ import annotations

from ..admission import entitlement_gap, max_gap, quota_deficit
from ..snapshot import Entry
from .base import Attempt


class Reclaim:
    """Borrowed capacity goes back to a quota that is entitled to it."""

    reason = "reclaim"
    outranks = False
    in_quota = True

    def applies(self, a: Attempt) -> bool:
        """Only a preemptor that would run In Quota may reclaim."""
        if a.entitled is not None:
            return a.entitled
        return entitlement_gap(a.state, a.w, a.pool, a.count) is None

    def candidates(self, a: Attempt) -> list[tuple[str, bool]]:
        """Every Not-in-Quota workload in the pool holds capacity someone is entitled to."""
        return [(q, True) for q in sorted(a.state.tree.quotas)]

    def bound(self, a: Attempt) -> int:
        """All borrowed GPU in the pool."""
        return sum(g for (_, p), g in a.state.borrowed.items() if p == a.pool)

    def admissible(self, a: Attempt) -> bool | None:
        """Entitled already; max may still bind."""
        ok = entitlement_gap(a.state, a.w, a.pool, a.count) is None
        return True if ok and max_gap(a.state, a.w, a.pool, a.count) is None else None

    def deficit(self, a: Attempt) -> int:
        """What max still misses."""
        return quota_deficit(a.state, a.w, a.pool, a.count, False)

    def allowed(self, a: Attempt, victim: Entry) -> bool:
        """Any borrower will do."""
        return not victim.in_quota
