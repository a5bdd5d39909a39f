"""Priority within a quota: strictly higher priority evicts lower, equal never does."""

from __future__ import annotations

from ..admission import entitlement_gap, max_gap, quota_deficit
from ..snapshot import Entry
from .base import Attempt, sorted_group


class PriorityPreemption:
    """Lower-priority training of the same quota makes room."""

    reason = "priority"
    outranks = True
    in_quota = True

    def applies(self, a: Attempt) -> bool:
        """Some running job of the quota has strictly lower priority; idle_only never preempts."""
        if a.w.idle == "idle_only":
            return False
        below = a.below = a.w.priority
        floor = a.state.lowest_priority(a.w.quota, a.pool)
        return floor is not None and floor < below

    def candidates(self, a: Attempt) -> list[tuple[str, bool]]:
        """The quota's own training; the stream stops at the preemptor's priority."""
        return [(a.w.quota, False)]

    def bound(self, a: Attempt) -> int:
        """GPU of the lower-priority group, cached per cycle (groups only shrink)."""
        state = a.state
        key = (a.w.quota, a.pool, a.w.priority)
        got = state.bound_cache.get(key)
        if got is None:
            got = 0
            for e in sorted_group(state, a.w.quota, a.pool, False):
                if e.w.priority >= a.w.priority:
                    break
                got += e.req[0] * e.pool_counts.get(a.pool, 0)
            state.bound_cache[key] = got
        return got

    def admissible(self, a: Attempt) -> bool | None:
        """In Quota once the victims' In-Quota share is free; evicting to borrow never is."""
        state, w = a.state, a.w
        if max_gap(state, w, a.pool, a.count) is not None:
            return None
        # Borrowing only takes capacity nobody uses: a preemptor that would still run Not in
        # Quota would be reclaimed by its victims next cycle, and so on for ever.
        return True if entitlement_gap(state, w, a.pool, a.count) is None else None

    def deficit(self, a: Attempt) -> int:
        """What the entitlement (and max) still misses."""
        return quota_deficit(a.state, a.w, a.pool, a.count, False)

    def allowed(self, a: Attempt, victim: Entry) -> bool:
        """Every streamed candidate is strictly lower priority."""
        return True
