"""Child-level preemption: a parent's own workload evicts training in its child quotas."""

from __future__ import annotations

from ..admission import entitlement_gap, max_gap, quota_deficit
from ..snapshot import Entry
from .base import Attempt


class ChildPreemption:
    """With child_preemption on, a workload submitted to the parent outranks its children."""

    reason = "child_preemption"
    outranks = True
    in_quota = True

    def applies(self, a: Attempt) -> bool:
        """Only for workloads submitted directly to a parent with child preemption on."""
        tree = a.state.tree
        q = a.w.quota
        return (
            tree.quotas[q].child_preemption and bool(tree.children[q]) and a.w.idle != "idle_only"
        )

    def candidates(self, a: Attempt) -> list[tuple[str, bool]]:
        """Training in any descendant quota, In Quota ones included."""
        return [(q, False) for q in sorted(a.state.tree.descendants[a.w.quota])]

    def bound(self, a: Attempt) -> int:
        """Everything the children use in the pool."""
        state = a.state
        return sum(state.used(state.usage, c, a.pool)[0] for c in state.tree.children[a.w.quota])

    def admissible(self, a: Attempt) -> bool | None:
        """The parent's own usage must leave room for it, along the whole chain."""
        ok = entitlement_gap(a.state, a.w, a.pool, a.count) is None
        return True if ok and max_gap(a.state, a.w, a.pool, a.count) is None else None

    def deficit(self, a: Attempt) -> int:
        """What the chain above the parent still misses."""
        return quota_deficit(a.state, a.w, a.pool, a.count, False)

    def allowed(self, a: Attempt, victim: Entry) -> bool:
        """Any child training job."""
        return True
