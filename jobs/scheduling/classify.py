"""The central rule: which running workloads are In Quota and which are Not in Quota."""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from typing import Any

from .snapshot import Entry, State
from .tree import QuotaTree, add_row
from .types import Snapshot

OrderKey = tuple[bool, int, float, float, str]
OKEY = attrgetter("okey")  # order_key without a Python-level call, for sorting


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
    tree: QuotaTree, quota: str, direct: dict[str, list[Entry]]
) -> tuple[list[Entry], bool]:
    """subtree_order as a list, and whether it happens to be sorted by order_key."""
    own = direct.get(quota, [])
    kids = [ordered(tree, c, direct) for c in tree.children[quota]]
    kids = [k for k in kids if k[0]]
    if not kids:
        return own, True
    if tree.quotas[quota].child_preemption:
        merged = _merge(kids)
        return (own + merged[0], False) if own else merged
    return _merge([(own, True), *kids])


def _merge(streams: list[tuple[list[Entry], bool]]) -> tuple[list[Entry], bool]:
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
        out.sort(key=OKEY)  # runs already sorted: timsort merges them
        return out, True
    flat: list[Entry] = []
    tops: list[Any] = []
    for lst, is_sorted in streams:
        flat.extend(lst)
        if is_sorted:
            tops.extend(map(OKEY, lst))
            continue
        top: Any = None
        for e in lst:
            k = e.okey
            if top is None or k > top:
                top = k
            tops.append(top)
    # a stable sort of positions on the running maximum alone: equal maxima only occur
    # within one stream, where position order is stream order
    order = sorted(range(len(flat)), key=tops.__getitem__)
    return [flat[i] for i in order], False


Row = list[int]
Limit = tuple[int, int, int] | None


class Labels:
    """A classification of the running set: each walked subtree's labels, and the free quotas."""

    __slots__ = ("units", "free")

    def __init__(self, units: dict[str, dict[str, bool]], free: list[str]) -> None:
        # topmost binding quota -> the labels of its subtree's entries, in walk order
        self.units = units
        # the quotas below no binding quota: their entries are In Quota unless idle_only
        self.free = free

    def walked(self) -> dict[str, bool]:
        """The labels of every walked entry, subtree after subtree."""
        out: dict[str, bool] = {}
        for labels in self.units.values():
            out.update(labels)
        return out

    def of_all(self, state: State) -> dict[str, bool]:
        """Every running entry's label: True = In Quota."""
        labels = self.walked()
        for q in self.free:
            for name, e in state.by_quota[q].items():
                labels[name] = e.w.idle != "idle_only"
        return labels


def classify_entries(state: State) -> dict[str, bool]:
    """Every running entry's label: True = In Quota (the state's labels and tables are
    left as they are)."""
    return _classify(state, None).of_all(state)


def relabel_entries(state: State) -> Labels:
    """Classify the running set and rebuild the state's In-Quota tables from the labels."""
    labels = _classify(state, None)
    state.changed.clear()  # the baseline of the next reclassify
    state.resized.clear()
    state.relabel(labels.walked())
    return labels


def reclassify(state: State, last: Labels) -> tuple[Labels, bool]:
    """The running set's classification after `last`, and whether some entry is labelled
    otherwise now: then those entries take their new labels, with the In-Quota tables.

    Only the subtrees whose running set changed since `last` are walked again: a subtree's
    labels depend on its own entries alone (see _classify), so the others keep theirs, and
    their entries still carry them.
    """
    labels = _classify(state, last)
    entries = state.entries
    flips: list[Entry] = []
    for q, walked in labels.units.items():
        if last.units.get(q) is not walked:
            flips.extend(entries[n] for n, ok in walked.items() if entries[n].in_quota != ok)
    for q in labels.free:
        flips.extend(
            e for e in state.by_quota[q].values() if e.in_quota != (e.w.idle != "idle_only")
        )
    for e in flips:
        state.flip(e)
    if flips:
        state.drop_victim_caches()
    return labels, bool(flips)


def _classify(state: State, last: Labels | None) -> Labels:
    """The labels of the entries under binding quotas, and the quotas with none above.

    Only quotas whose min can bind need the walk's order: a quota binds when the In-Quota
    usage its subtree could reach (its own entries, plus each child's capped at that
    child's min) exceeds its own min. Below no binding quota every entry is In Quota
    unless idle_only, in any order; under a topmost binding quota the subtree's own order
    decides (it is that subtree's part of the root's order), checking binding rows only.
    Which quotas bind below a quota, and so the walk of a topmost binding quota, depend on
    its subtree's entries alone: a subtree that was walked in `last` and whose running set
    has not changed since keeps its labels.
    """
    tree = state.tree
    binding = _binding(tree, state.claims)
    touched = _touched(state) if last is not None else set()
    units: dict[str, dict[str, bool]] = {}
    free: list[str] = []
    stack = tree.roots()
    while stack:
        q = stack.pop()
        if q in binding:
            got = None
            if last is not None and q not in touched:
                got = last.units.get(q)
            if got is None:
                got = {}
                _walk(state, q, binding, got)
            units[q] = got
        else:
            free.append(q)
            stack.extend(tree.children[q])
    return Labels(units, free)


def _touched(state: State) -> set[str]:
    """The quotas whose subtree's running set changed since the last classification (an
    entry removed and restored, or grown and shrunk back, is no change)."""
    out: set[str] = set()
    chains = state.tree.chain
    for q, before in state.changed.items():
        if before != state.by_quota[q]:  # entries compare by identity
            out.update(chains[q])
    for e, count in state.resized.values():
        if len(e.placements) != count:
            out.update(chains[e.w.quota])
    state.changed.clear()
    state.resized.clear()
    return out


def _walk(state: State, top: str, binding: set[str], labels: dict[str, bool]) -> None:
    """Label the subtree of a topmost binding quota in its order, checking binding rows."""
    tree = state.tree
    now = state.now
    direct: dict[str, list[Entry]] = {}
    last_order = state.walk_order
    for q in (top, *tree.descendants[top]):
        by = state.by_quota[q]
        if not by:
            continue
        # The quota's entries as the last walk sorted them, still running, then the new
        # ones (never ranked): timsort merges the sorted run with the few new ones.
        last = last_order.get(q)
        lst = [] if last is None else [e for e in last if by.get(e.w.name) is e]
        if len(lst) < len(by):
            lst.extend(e for e in by.values() if e.okey is None)
            if len(lst) != len(by):  # ranked once, then out and back: take them all
                lst = list(by.values())
        for e in lst:
            if e.okey is None:
                e.okey = rank(e, now)
        lst.sort(key=OKEY)
        last_order[q] = direct[q] = lst
    # submission quota -> pool -> [(min, live subtree usage)] of the binding quotas above
    # (keyed by name, then pool: no key tuple to build and hash per entry)
    rows: dict[str, dict[str, list[tuple[Limit, Row]]]] = {}
    live: dict[tuple[str, str], Row] = {}
    mins = tree.mins
    chains = tree.chain
    for e in ordered(tree, top, direct)[0]:
        w = e.w
        if w.idle == "idle_only":
            labels[w.name] = False
            continue
        g, c, m = e.req
        pc = e.pool_counts
        per = rows.get(w.quota)
        if per is None:
            per = rows[w.quota] = {}
        ok = True
        for pool, count in pc.items():
            chk = per.get(pool)
            if chk is None:
                chk = per[pool] = []
                for a in chains[w.quota]:
                    if a in binding:
                        u = live.get((a, pool))
                        if u is None:
                            u = live[(a, pool)] = [0, 0, 0]
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
        if ok:
            for pool, count in pc.items():
                ag, ac, am = g * count, c * count, m * count
                for _, u in per[pool]:
                    add_row(u, ag, ac, am)
        labels[w.name] = ok


def _binding(tree: QuotaTree, totals: dict[str, dict[str, Row]]) -> set[str]:
    """Quotas whose min some In-Quota check could fail on, given the entries' totals.

    A child's subtree never holds more In Quota than its min (every entry below is checked
    against it; a zero CPU/memory min is unconstrained, no min in a pool admits no GPU), so
    a parent's reach is its own entries plus its children's reach capped that way.
    """
    reach: dict[str, dict[str, Row]] = {}
    out: set[str] = set()
    for q in sorted(tree.quotas, key=lambda n: -tree.depth[n]):
        mine: dict[str, Row] = {}
        for c in tree.children[q]:
            for pool, r in reach[c].items():
                t = mine.setdefault(pool, [0, 0, 0])
                add_row(t, r[0], r[1], r[2])
        for pool, r in totals.get(q, {}).items():
            t = mine.setdefault(pool, [0, 0, 0])
            add_row(t, r[0], r[1], r[2])
        capped: dict[str, Row] = {}
        for pool, t in mine.items():
            limit = tree.mins[q].get(pool)
            if limit is None:
                if t[0] > 0:
                    out.add(q)
                capped[pool] = [0, t[1], t[2]]
                continue
            if t[0] > limit[0] or (limit[1] and t[1] > limit[1]) or (limit[2] and t[2] > limit[2]):
                out.add(q)
            capped[pool] = [
                min(t[0], limit[0]),
                min(t[1], limit[1]) if limit[1] else t[1],
                min(t[2], limit[2]) if limit[2] else t[2],
            ]
        reach[q] = capped
    return out


def classify(snapshot: Snapshot) -> dict[str, bool]:
    """Label every running workload of a snapshot: True = In Quota."""
    return classify_entries(State(snapshot))
