"""The central rule: which running workloads are In Quota and which are Not in Quota."""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from .snapshot import Entry, State
from .tree import QuotaTree, within
from .types import Snapshot

OrderKey = tuple[bool, int, float, float, str]


def order_key(e: Entry) -> OrderKey:
    """The key set by classify_entries (see rank)."""
    assert e.okey is not None
    return e.okey


def rank(e: Entry, now: float) -> OrderKey:
    """Non-preemptible first, priority descending, oldest start, first submitted, then name.

    DESIGN lists priority before "not-preemptible first", but its other rule binds harder:
    inference services and interactive instances never borrow and are never victims, so
    they run In Quota only. Ranked by priority first, a low-priority service sharing a quota
    with higher-priority training would be labelled Not in Quota — a label that no eviction
    could act on and that contradicts "In Quota only" — so non-preemptible workloads claim
    their quota before any training, whatever the priorities (see
    test_a_low_priority_service_stays_in_quota_ahead_of_high_priority_training). A workload
    starting this cycle starts at `now`, exactly as the next cycle will see it, so the label
    its admission gave it does not flip one cycle later. Ties on start time (two admissions
    of one cycle) go to the one submitted first, which was also admitted first.
    """
    w = e.w
    started = w.started_at if w.started_at is not None else now
    return (w.preemptible, -w.priority, started, w.submitted_at, w.name)


def subtree_order(tree: QuotaTree, quota: str, direct: dict[str, list[Entry]]) -> Iterator[Entry]:
    """Running workloads of a subtree in DESIGN's order (a lazy, stable merge)."""
    own = direct.get(quota, [])
    kids = [subtree_order(tree, c, direct) for c in tree.children[quota]]
    if tree.quotas[quota].child_preemption:
        # A parent with child preemption ranks its own workloads before all of its children's.
        yield from own
        if kids:
            yield from heapq.merge(*kids, key=order_key)
    elif kids:
        yield from heapq.merge(own, *kids, key=order_key)
    else:
        yield from own


def classify_entries(state: State) -> dict[str, bool]:
    """Walk every root's order, label each running entry and update the state's tables."""
    tree = state.tree
    direct: dict[str, list[Entry]] = {}
    now = state.now
    for e in state.entries.values():
        e.okey = rank(e, now)
        direct.setdefault(e.w.quota, []).append(e)
    for lst in direct.values():
        lst.sort(key=order_key)
    result: dict[str, bool] = {}
    inq: dict[tuple[str, str], list[int]] = {}
    mins = tree.mins
    chains = tree.chain
    for root in tree.roots():
        for e in subtree_order(tree, root, direct):
            w = e.w
            ok = w.idle != "idle_only"
            if ok:
                ok = _fits_chain(inq, mins, chains[w.quota], e)
            if ok:
                g, c, m = e.req
                for pool, count in e.pool_counts.items():
                    for a in chains[w.quota]:
                        u = inq.get((a, pool))
                        if u is None:
                            inq[(a, pool)] = [g * count, c * count, m * count]
                        else:
                            u[0] += g * count
                            u[1] += c * count
                            u[2] += m * count
            result[w.name] = ok
    state.relabel(result)
    return result


def _fits_chain(
    inq: dict[tuple[str, str], list[int]],
    mins: dict[str, dict[str, tuple[int, int, int]]],
    chain: tuple[str, ...],
    e: Entry,
) -> bool:
    """Whether the entry fits within min on its quota and every ancestor, in every pool."""
    g, c, m = e.req
    for pool, count in e.pool_counts.items():
        add = (g * count, c * count, m * count)
        for a in chain:
            limit = mins[a].get(pool)
            if limit is None:
                if add[0] > 0:
                    return False
                continue
            used = inq.get((a, pool)) or (0, 0, 0)
            if not within(used, add, limit, True):
                return False
    return True


def classify(snapshot: Snapshot) -> dict[str, bool]:
    """Label every running workload of a snapshot: True = In Quota."""
    state = State(snapshot)
    return classify_entries(state)
