"""Priority within a quota: strictly higher priority evicts lower, equal never does."""

from __future__ import annotations

from ..admission import entitlement_gap, idle_gpu, max_gap, may_borrow, quota_deficit
from ..snapshot import Entry
from .base import Attempt, sorted_group


class PriorityPreemption:
    """Lower-priority training of the same quota makes room."""

    reason = "priority"

    def applies(self, a: Attempt) -> bool:
        """Some running job of the quota must have strictly lower priority."""
        a.below = a.w.priority
        group = sorted_group(a.state, a.w.quota, a.pool, False)
        return any(e.w.priority < a.below for e in group[:1])

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
        """In Quota once entitled, or borrowed if its idle policy allows and idle suffices."""
        state, w = a.state, a.w
        if max_gap(state, w, a.pool, a.count) is not None:
            return None
        if entitlement_gap(state, w, a.pool, a.count) is None:
            return True
        if may_borrow(w) and idle_gpu(state, w.quota, a.pool) >= w.request.gpu * a.count:
            return False
        return None

    def deficit(self, a: Attempt) -> int:
        """The cheaper of In Quota or borrowing."""
        return quota_deficit(a.state, a.w, a.pool, a.count, True)

    def allowed(self, a: Attempt, victim: Entry) -> bool:
        """Every streamed candidate is strictly lower priority."""
        return True
