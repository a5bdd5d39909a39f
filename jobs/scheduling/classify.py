"""The central rule: which running workloads are In Quota and which are Not in Quota."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any

from .snapshot import Entry, State
from .tree import QuotaTree
from .types import Snapshot

OrderKey = tuple[bool, int, float, float, str]
_OKEY = attrgetter("okey")  # order_key without a Python-level call, for sorting
# position in the classification's global order_key order: the same order, compared as ints
_ORANK = attrgetter("orank")


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
    """Running workloads of a subtree in DESIGN's order (a lazy, stable merge).

    `direct` holds each quota's own entries sorted by order_key. A parent with child
    preemption ranks its own workloads before all of its children's; elsewhere a quota's own
    workloads and its children's streams are merged by their heads.
    """
    yield from ordered(tree, quota, direct)[0]


def ordered(
    tree: QuotaTree,
    quota: str,
    direct: dict[str, list[Entry]],
    key: Callable[[Entry], Any] = _OKEY,
) -> tuple[list[Entry], bool]:
    """subtree_order as a list, and whether it happens to be sorted by order_key.

    key is order_key or anything ordering the entries the same way (see _ORANK).
    """
    own = direct.get(quota, [])
    kids = [ordered(tree, c, direct, key) for c in tree.children[quota]]
    kids = [k for k in kids if k[0]]
    if not kids:
        return own, True
    if tree.quotas[quota].child_preemption:
        merged = _merge(kids, key)
        return (own + merged[0], False) if own else merged
    return _merge([(own, True), *kids], key)


def _merge(
    streams: list[tuple[list[Entry], bool]], key: Callable[[Entry], Any] = _OKEY
) -> tuple[list[Entry], bool]:
    """What heapq.merge(*streams, key=order_key) yields, by one stable sort.

    A merge by heads emits an element that ranks ahead of an earlier one of its own stream
    right after that one (every other head ranks behind the earlier one, or it would have
    gone first). So the merge equals a stable sort on each element's running maximum of
    order_key within its stream; keys are unique (they end in the name), so equal running
    maxima only occur within one stream, where the stable sort keeps stream order.
    """
    streams = [s for s in streams if s[0]]
    if not streams:
        return [], True
    if len(streams) == 1:
        return streams[0]
    if all(ok for _, ok in streams):
        out = [e for lst, _ in streams for e in lst]
        out.sort(key=key)  # runs already sorted: timsort merges them
        return out, True
    flat: list[Entry] = []
    tops: list[Any] = []
    for lst, is_sorted in streams:
        flat.extend(lst)
        if is_sorted:
            tops.extend(map(key, lst))
            continue
        top: Any = None
        for e in lst:
            k = key(e)
            if top is None or k > top:
                top = k
            tops.append(top)
    # a stable sort of positions on the running maximum alone: equal maxima only occur
    # within one stream, where position order is stream order
    order = sorted(range(len(flat)), key=tops.__getitem__)
    return [flat[i] for i in order], False


def classify_entries(state: State, apply: bool = True) -> dict[str, bool]:
    """Walk every root's order, label each running entry and, when apply is set, update
    the state's tables (the cycle's final labelling only reports them)."""
    tree = state.tree
    direct: dict[str, list[Entry]] = {}
    now = state.now
    entries = state.entries
    # Every running entry in order_key order. The keys never change within a cycle (see
    # rank), so a later classification keeps the previous order of the entries still
    # running and merges in the new ones (two sorted runs: one timsort merge).
    prior = state.class_order
    if prior:
        order = [e for e in prior if entries.get(e.w.name) is e]
        if len(order) != len(entries):
            seen = {e.w.name for e in order}
            extra = [e for name, e in entries.items() if name not in seen]
            for e in extra:
                if e.okey is None:
                    e.okey = rank(e, now)
            extra.sort(key=_OKEY)
            order.extend(extra)
            order.sort(key=_OKEY)
    else:
        order = list(entries.values())
        for e in order:
            if e.okey is None:
                e.okey = rank(e, now)
        order.sort(key=_OKEY)
    state.class_order = order
    # per-quota lists come out sorted; merges compare positions instead of key tuples
    for i, e in enumerate(order):
        e.orank = i
        lst = direct.get(e.w.quota)
        if lst is None:
            direct[e.w.quota] = [e]
        else:
            lst.append(e)
    result: dict[str, bool] = {}
    # (quota, pool) -> In-Quota usage of the subtree, filled as the walk admits entries
    inq: dict[tuple[str, str], list[int]] = {}
    # (submission quota, pool) -> [(min, usage row)] along the chain; None where a quota of
    # the chain has no min in the pool (only GPU-free requests fit there)
    rows: dict[tuple[str, str], list[tuple[tuple[int, int, int] | None, list[int]]]] = {}
    mins = tree.mins
    chains = tree.chain
    for root in tree.roots():
        for e in ordered(tree, root, direct, _ORANK)[0]:
            w = e.w
            if w.idle == "idle_only":
                result[w.name] = False
                continue
            g, c, m = e.req
            pc = e.pool_counts
            checks = []
            ok = True
            for pool, count in pc.items():
                key = (w.quota, pool)
                chk = rows.get(key)
                if chk is None:
                    chk = rows[key] = []
                    for a in chains[w.quota]:
                        u = inq.get((a, pool))
                        if u is None:
                            u = inq[(a, pool)] = [0, 0, 0]
                        chk.append((mins[a].get(pool), u))
                ag, ac, am = g * count, c * count, m * count
                for limit, u in chk:
                    if limit is None:
                        if ag > 0:
                            ok = False
                            break
                        continue
                    # within(u, add, limit, loose=True): a zero CPU/memory min is unconstrained
                    if (
                        u[0] + ag > limit[0]
                        or (ac and limit[1] and u[1] + ac > limit[1])
                        or (am and limit[2] and u[2] + am > limit[2])
                    ):
                        ok = False
                        break
                if not ok:
                    break
                checks.append((chk, ag, ac, am))
            if ok:
                for chk, ag, ac, am in checks:
                    for _, u in chk:
                        u[0] += ag
                        u[1] += ac
                        u[2] += am
            result[w.name] = ok
    if apply:
        state.relabel(result, inq)
    return result


def classify(snapshot: Snapshot) -> dict[str, bool]:
    """Label every running workload of a snapshot: True = In Quota."""
    state = State(snapshot)
    return classify_entries(state, apply=False)
