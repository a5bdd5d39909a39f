"""The central rule: which running workloads are In Quota and which are Not in Quota.

The label is part of the state (DESIGN §1). A running workload keeps the label it has:
- one whose label is unknown gets it in start order, oldest first, as it was admitted;
- where a subtree holds more In Quota than its min (a smaller min at the start of the cycle,
  a parent's own workload admitted by child-level preemption during it), the walk of that
  subtree keeps its In-Quota workloads in DESIGN's order and turns the rest Not in Quota;
- a Not-in-Quota workload (all but idle_only) becomes In Quota once its quota has room for it
  along its whole chain, in the same order.
Nothing else changes a label: a newcomer never takes an incumbent's place by outranking it.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from typing import Any

from .snapshot import Entry, State
from .tree import QuotaTree, Vec, add_row
from .types import Demotion, Snapshot

OrderKey = tuple[bool, int, float, float, str]
OKEY = attrgetter("okey")  # order_key without a Python-level call, for sorting


def order_key(e: Entry) -> OrderKey:
    """The key a walk set (see rank)."""
    assert e.okey is not None
    return e.okey


def rank(e: Entry, now: float) -> OrderKey:
    """DESIGN's order: non-preemptible first, priority descending, oldest start; then first
    submitted, then name, so keys are unique.

    A workload starting this cycle starts at `now`, exactly as the next cycle will see it.
    Ties on start time (two admissions of one cycle) go to the one submitted first, which was
    also admitted first.
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
BIG = 1 << 62  # room left by a zero CPU/memory min: unconstrained


def start_key(e: Entry, now: float) -> tuple[float, float, str]:
    """Admission order: oldest start first (a workload starting this cycle starts now)."""
    w = e.w
    return (w.started_at if w.started_at is not None else now, w.submitted_at, w.name)


def over_min(limit: Vec | None, u: Row) -> bool:
    """In-Quota usage u exceeds a min (a zero CPU/memory min is unconstrained, no min in a
    pool admits no GPU)."""
    if limit is None:
        return u[0] > 0
    return (
        u[0] > limit[0] or bool(limit[1] and u[1] > limit[1]) or bool(limit[2] and u[2] > limit[2])
    )


def fits_min(limit: Vec | None, u: Row, g: int, c: int, m: int) -> bool:
    """Adding (g, c, m) to In-Quota usage u stays within a min, as admission checks it
    (tree.within, loose): GPU always, CPU and memory only when added and constrained."""
    if limit is None:
        return u[0] + g <= 0
    if u[0] + g > limit[0]:
        return False
    if c and limit[1] and u[1] + c > limit[1]:
        return False
    return not (m and limit[2] and u[2] + m > limit[2])


def label_running(state: State) -> list[Demotion]:
    """Step 3 of the cycle: label the running set as the state says, infer the unknown labels,
    then apply the rule (a smaller min turns some Not in Quota; room turns some In Quota).

    Returns the workloads that lost their In-Quota label: a smaller min took it. Every
    Not-in-Quota entry is left with the reason its eviction would give (see _why_not).
    """
    labels: dict[str, bool] = {}
    unknown: list[Entry] = []
    for name, e in state.entries.items():
        w = e.w
        if w.idle == "idle_only":
            labels[name] = False
        elif w.in_quota is None:
            unknown.append(e)
        else:
            labels[name] = w.in_quota
    if unknown:
        _infer(state, unknown, labels)
    state.relabel(labels)
    demoted = _demote(state, False)
    upgrade(state)
    for by in state.upgradable.values():
        for e in by.values():
            if not e.why:
                _why_not(state, e)
    return demoted


def settle(state: State) -> tuple[list[Demotion], bool]:
    """After a round of admissions: the walk of every subtree a parent's own admission pushed
    over its min (child-level preemption), then the upgrades that room allows; the
    demotions, and whether any label changed."""
    demoted = _demote(state, True)
    up = upgrade(state)
    return demoted, bool(demoted) or up


def _why_not(state: State, e: Entry) -> None:
    """Why a workload that came in Not in Quota is: a borrower borrows; one that never
    borrows lost its label to a smaller min or to its parent's own workloads (the quota that
    now blocks it says which)."""
    w = e.w
    if w.kind == "training" and w.idle in ("acceptable", "idle_only"):
        e.why = "reclaim"
        return
    tree = state.tree
    e.why, e.why_quota = "min", w.quota
    for pool, count in e.pool_counts.items():
        g, c, m = e.req
        for a in tree.chain[w.quota]:
            u = state.used(state.inq, a, pool)
            if not fits_min(tree.mins[a].get(pool), u, g * count, c * count, m * count):
                own = state.used(state.direct_inq, a, pool)
                if a != w.quota and tree.quotas[a].child_preemption and any(own):
                    e.why = "child_preemption"
                e.why_quota = a
                return


def _infer(state: State, unknown: list[Entry], labels: dict[str, bool]) -> None:
    """Labels of the entries whose label is unknown, in start order, oldest first: In Quota
    when it fits within min along the chain beside the In-Quota ones before it.

    Only quotas whose min can bind need the order (see _binding): below none of them every
    entry fits, in any order. (A scenario labels all of its running set or none of it, and
    the control loop all of it: mixed, every quota is checked.)
    """
    tree = state.tree
    # _binding's reach trusts every child to hold at most its min In Quota, which known
    # labels need not (a smaller min since): with some In Quota, every quota may bind
    binding = set(tree.quotas) if any(labels.values()) else _binding(tree, state.claims)
    bchain = {q: [a for a in c if a in binding] for q, c in tree.chain.items()}
    mins = tree.mins
    rows: dict[tuple[str, str], Row] = {}
    walk: list[Entry] = []
    for e in unknown:
        if bchain[e.w.quota]:
            walk.append(e)
        else:
            labels[e.w.name] = True
    if not walk:
        return
    entries = state.entries
    for name, ok in labels.items():
        if ok:
            e = entries[name]
            _add(rows, bchain[e.w.quota], e)
    now = state.now
    walk.sort(key=lambda e: start_key(e, now))
    for e in walk:
        chk = bchain[e.w.quota]
        g, c, m = e.req
        ok = True
        for pool, count in e.pool_counts.items():
            for a in chk:
                u = rows.get((a, pool))
                if u is None:
                    u = rows[(a, pool)] = [0, 0, 0]
                if not fits_min(mins[a].get(pool), u, g * count, c * count, m * count):
                    ok = False
                    break
            if not ok:
                break
        if ok:
            _add(rows, chk, e)
        labels[e.w.name] = ok


def _add(rows: dict[tuple[str, str], Row], quotas: list[str], e: Entry) -> None:
    """Count an entry's usage in the rows of some quotas of its chain."""
    g, c, m = e.req
    for pool, count in e.pool_counts.items():
        for a in quotas:
            u = rows.get((a, pool))
            if u is None:
                rows[(a, pool)] = [g * count, c * count, m * count]
            else:
                add_row(u, g * count, c * count, m * count)


def _over(state: State) -> set[str]:
    """Quotas whose subtree holds more In Quota than their min in some pool."""
    mins = state.tree.mins
    return {q for (q, pool), u in state.inq.items() if over_min(mins[q].get(pool), u)}


def _demote(state: State, child: bool) -> list[Demotion]:
    """Walk every subtree whose In-Quota usage exceeds a min; the demotions.

    During the cycle (child=True) only a parent's own admission can push a subtree over its
    min (every other In-Quota admission fits within min), so the walk is the parent's
    subtree: its own workloads first, and the room they took comes out of its children's,
    never out of a sibling's. Each parent's walk checks its own row and the rows its own
    admissions counted its children's room in (ancestors with no such admission of their
    own), so a demotion names the admission that took the room. At the start of the cycle it
    is a smaller min: the walk is that of the topmost quota over its min.
    """
    over = _over(state)
    if not over:
        return []
    tree = state.tree
    out: list[Demotion] = []
    if child:
        parents: set[str] = set()
        for name in state.fresh:
            e = state.entries.get(name)
            if e is not None and e.in_quota:
                q = e.w.quota
                if tree.quotas[q].child_preemption and tree.children[q]:
                    parents.add(q)
        for p in sorted(parents, key=lambda q: (-tree.depth[q], q)):
            # its own row, and the rows of the ancestors that admitted nothing of their own
            # by child-level preemption: only a parent's own admission below can have pushed
            # those over (it counted its children's In-Quota usage as room there too, see
            # admission.behind). An ancestor's row over its min by the ancestor's own
            # admission is left to the ancestor's walk (later: deeper parents go first),
            # which demotes for it.
            rows = [a for a in tree.chain[p] if a in over and (a == p or a not in parents)]
            if rows:
                out.extend(_walk(state, p, rows, "child_preemption"))
                over = _over(state)
                if not over:
                    return out
    for top in sorted(q for q in over if not any(a in over for a in tree.chain[q][1:])):
        rows = [a for a in over if top in tree.chain[a]]
        out.extend(_walk(state, top, rows, "child_preemption" if child else "min"))
    return out


def _walk(state: State, top: str, over: list[str], reason: str) -> list[Demotion]:
    """Keep the In-Quota entries of top's subtree In Quota in DESIGN's order while they fit
    the rows of the quotas `over` (each seeded with the usage from outside the subtree), and
    turn the rest Not in Quota."""
    tree = state.tree
    direct: dict[str, list[Entry]] = {}
    for q in (top, *tree.descendants[top]):
        by = state.by_quota[q]
        if by:
            direct[q] = _in_order(
                state, state.walk_order, q, [e for e in by.values() if e.in_quota]
            )
    mins = tree.mins
    chains = tree.chain
    inside = tree.descendants[top]
    above = set(chains[top][1:])
    # (over quota, pool) -> usage so far: outside the subtree for a quota above it
    live: dict[tuple[str, str], Row] = {}
    for (a, pool), t in state.inq.items():
        if a in above and a in over:
            sub = state.used(state.inq, top, pool)
            live[(a, pool)] = [t[0] - sub[0], t[1] - sub[1], t[2] - sub[2]]
    rows = {q: [a for a in chains[q] if a in over] for q in (top, *inside)}
    fresh = state.fresh
    by_name = ""
    drop: list[tuple[Entry, str]] = []
    for e in ordered(tree, top, direct)[0]:
        w = e.w
        if reason == "child_preemption" and w.quota == top and w.name in fresh:
            by_name = w.name
        g, c, m = e.req
        failed = ""
        chk = rows[w.quota]
        for pool, count in e.pool_counts.items():
            for a in chk:
                u = live.get((a, pool))
                if u is None:
                    u = live[(a, pool)] = [0, 0, 0]
                if not fits_min(mins[a].get(pool), u, g * count, c * count, m * count):
                    failed = a
                    break
            if failed:
                break
        if failed:
            drop.append((e, failed))
        else:
            _add(live, chk, e)
    out: list[Demotion] = []
    for e, failed in drop:
        state.flip(e)
        e.why = reason
        e.why_quota = top if reason == "child_preemption" else failed
        out.append(Demotion(e.w.name, by_name, reason, e.why_quota))
    if drop:
        state.drop_victim_caches()
    return out


def upgrade(state: State) -> bool:
    """Turn In Quota every Not-in-Quota entry whose quota has room for it within min along
    its whole chain, in DESIGN's order; whether any did."""
    if state.upgrade_seen == state.inq_freed:
        return False  # no In-Quota usage given back since the last look: no new room
    tree = state.tree
    rooms: dict[tuple[str, str], tuple[int, int, int]] = {}
    cands: dict[str, list[Entry]] = {}
    for q, by in state.upgradable.items():
        if not by:
            continue
        for e in by.values():
            if _fits_room(state, e, rooms):
                lst = cands.get(q)
                if lst is None:
                    cands[q] = [e]
                else:
                    lst.append(e)
    state.upgrade_seen = state.inq_freed
    if not cands:
        return False
    by_root: dict[str, list[Entry]] = {}
    for q, lst in cands.items():
        by_root.setdefault(tree.root[q], []).extend(lst)
    changed = False
    for root in sorted(by_root):
        mine = by_root[root]
        if len(mine) > 1:
            # DESIGN's order of every Not-in-Quota entry of the tree, not of the candidates
            # alone: under a parent with child preemption the order merges streams by their
            # heads, so an entry that cannot move up still places the ones after it
            direct: dict[str, list[Entry]] = {}
            for q in (root, *tree.descendants[root]):
                by = state.upgradable[q]
                if by:
                    direct[q] = _in_order(state, state.up_order, q, list(by.values()))
            chosen = {id(e) for e in mine}
            mine = [e for e in ordered(tree, root, direct)[0] if id(e) in chosen]
        for e in mine:
            if _fits_room(state, e, {}):  # the rows as the ones before it left them
                state.flip(e)
                changed = True
    if changed:
        state.drop_victim_caches()
        state.upgrade_seen = state.inq_freed
    return changed


def _in_order(
    state: State, cache: dict[str, list[Entry]], q: str, entries: list[Entry]
) -> list[Entry]:
    """A quota's entries sorted by rank, starting from the order its last sort left (timsort
    merges that sorted run with the few entries new since)."""
    now = state.now
    live = {id(e) for e in entries}
    last = cache.get(q)
    lst = [] if last is None else [e for e in last if id(e) in live]
    if len(lst) < len(entries):
        seen = {id(e) for e in lst}
        lst.extend(e for e in entries if id(e) not in seen)
    for e in lst:
        if e.okey is None:
            e.okey = rank(e, now)
    lst.sort(key=OKEY)
    cache[q] = lst
    return lst


def _fits_room(state: State, e: Entry, rooms: dict[tuple[str, str], tuple[int, int, int]]) -> bool:
    """Whether the entry fits In Quota along its chain in every pool it runs in; never in a
    pool its quotas no longer allow (it keeps running there, borrowed)."""
    g, c, m = e.req
    q = e.w.quota
    only = state.tree.allowed.get(q)
    for pool, count in e.pool_counts.items():
        if only is not None and pool not in only:
            return False
        r = rooms.get((q, pool))
        if r is None:
            r = rooms[(q, pool)] = _room(state, q, pool)
        # as fits_min: CPU and memory only when the entry holds some
        if g * count > r[0] or (c and c * count > r[1]) or (m and m * count > r[2]):
            return False
    return True


def _room(state: State, quota: str, pool: str) -> tuple[int, int, int]:
    """In-Quota room left along a quota's chain in a pool."""
    tree = state.tree
    rg = rc = rm = BIG
    for a in tree.chain[quota]:
        limit = tree.mins[a].get(pool)
        u = state.used(state.inq, a, pool)
        if limit is None:
            rg = min(rg, -u[0])
            continue
        rg = min(rg, limit[0] - u[0])
        if limit[1]:
            rc = min(rc, limit[1] - u[1])
        if limit[2]:
            rm = min(rm, limit[2] - u[2])
    return (rg, rc, rm)


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
    """Label every running workload of a snapshot as the cycle's step 3 does: True = In Quota."""
    state = State(snapshot)
    label_running(state)
    return {name: e.in_quota for name, e in state.entries.items()}
