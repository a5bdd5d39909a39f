"""Fair-share reclaim among borrowers: weighted max-min shares, never inverting the order."""

from __future__ import annotations

from ..admission import idle_gpu, max_gap, may_borrow, scope_key
from ..snapshot import Entry
from .base import Attempt


class FairShareReclaim:
    """A borrower below its fair share takes borrowed capacity from a quota above its share."""

    reason = "fair_share"
    outranks = False
    in_quota = False

    def _borrowed(self, a: Attempt, quota: str) -> int:
        return a.state.borrowed.get((quota, a.pool), 0)

    def applies(self, a: Attempt) -> bool:
        """The preemptor may borrow GPUs and would stay within its fair share.

        Shares are of borrowed GPUs: a preemptor that needs none gains no share by an
        eviction, which would only free a GPU job's cores or memory and leave its GPUs idle.
        """
        w = a.w
        if not w.request.gpu or not may_borrow(w) or w.quota not in a.shares:
            return False
        after = self._borrowed(a, w.quota) + w.request.gpu * a.count
        return after <= a.shares[w.quota] + 1e-6

    def candidates(self, a: Attempt) -> list[tuple[str, bool]]:
        """Borrowers of other quotas in the same scope that are above their share."""
        state = a.state
        mine = a.w.quota
        scope = scope_key(state, mine)
        pool = a.pool
        borrowed = state.borrowed
        shares = a.shares
        # most quotas borrow nothing: the cheap test first, the order once the few are known
        out = [
            q
            for q in state.tree.quotas
            if borrowed.get((q, pool), 0) > shares.get(q, 0.0) + 1e-6
            and q != mine
            and scope_key(state, q) == scope
        ]
        return [(q, True) for q in sorted(out)]

    def bound(self, a: Attempt) -> int:
        """What those quotas borrow in the pool."""
        return sum(self._borrowed(a, q) for q, _ in self.candidates(a))

    def admissible(self, a: Attempt) -> bool | None:
        """Enough idle after the removals, and max allows it."""
        state, w = a.state, a.w
        if max_gap(state, w, a.pool, a.count) is not None:
            return None
        return False if idle_gpu(state, w.quota, a.pool) >= w.request.gpu * a.count else None

    def deficit(self, a: Attempt) -> int:
        """Idle still missing."""
        need = a.w.request.gpu * a.count
        return max(0, need - idle_gpu(a.state, a.w.quota, a.pool))

    def allowed(self, a: Attempt, victim: Entry) -> bool:
        """Only if the victim's quota stays at least as well served, by weight, as ours."""
        if victim.in_quota:
            return False
        mine = a.w.quota
        theirs = victim.w.quota
        pool = a.pool
        borrowed = a.state.borrowed
        weights = a.weights
        need = a.w.request.gpu * a.count
        gain = victim.req[0] * victim.pool_counts.get(pool, 0)
        after_mine = (borrowed.get((mine, pool), 0) + need) / weights.get(mine, 1.0)
        after_theirs = (borrowed.get((theirs, pool), 0) - gain) / weights.get(theirs, 1.0)
        return after_mine <= after_theirs + 1e-9
