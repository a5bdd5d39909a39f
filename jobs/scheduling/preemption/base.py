"""The preemption interface and the placement-aware, minimal victim search all kinds share."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from itertools import islice
from operator import attrgetter
from typing import Protocol

from ..admission import Shares
from ..placement import Choice, find_node, hands_out
from ..snapshot import Entry, NodeState, State
from ..types import MILLI, Workload

VictimKey = tuple[int, bool, float, float, str]
_KEY = attrgetter("key")  # the victim key once set, without a Python-level call
# the best candidates whose nodes are examined per replica bound the search: they weigh
# NODE_SCAN whole-GPU candidates, and number at most WINDOW_MAX however light (see fill)
NODE_SCAN = 48
WINDOW_MAX = 2 * NODE_SCAN
# kinds whose allowed() never changes within a cycle (it reads only the victim's label), so
# a failed best-node search over the same window and node capacities fails again
STATIC_ALLOWED = frozenset(("reclaim", "child_preemption", "priority"))


class Attempt:
    """One preemptor trying to start count replicas in one pool."""

    # a plain class, not a dataclass: compiled, a dataclass is built through Python code
    __slots__ = (
        "state",
        "w",
        "pool",
        "count",
        "shares",
        "weights",
        "below",
        "outranks",
        "in_quota",
        "entitled",
    )

    def __init__(self, state: State, w: Workload, pool: str, count: int) -> None:
        self.state = state
        self.w = w
        self.pool = pool
        self.count = count
        self.shares: Shares = {}
        self.weights: dict[str, float] = {}
        self.below: int | None = None  # victims must have priority strictly below this
        # whether the kind's preemptor outranks every candidate: a preemptor started this
        # cycle yields its place to it (see _eligible); set by search from the kind
        self.outranks = False
        # whether the kind's preemptor runs In Quota: it may take a borrower started this
        # cycle whose victims all ran Not in Quota (see _eligible); set by search
        self.in_quota = False
        # whether w fits In Quota in the pool before any removal, when the caller knows
        self.entitled: bool | None = None


class PreemptionKind(Protocol):
    """A kind of preemption: who may be evicted, and when the preemptor may then run."""

    reason: str
    # whether its preemptor outranks every candidate (by priority in their quota, or as their
    # parent's own workload), so that one started this cycle yields its place to it
    outranks: bool
    # whether its preemptor runs In Quota (every kind but fair-share reclaim, between borrowers)
    in_quota: bool

    def applies(self, a: Attempt) -> bool:
        """Cheap test: could this kind help at all."""
        ...

    def candidates(self, a: Attempt) -> list[tuple[str, bool]]:
        """(quota, Not-in-Quota only) groups of the pool whose training may be evicted."""
        ...

    def bound(self, a: Attempt) -> int:
        """An upper bound of the milli-GPU these candidates hold in the pool."""
        ...

    def admissible(self, a: Attempt) -> bool | None:
        """After the removals so far: the preemptor's In-Quota label, or None if still blocked."""
        ...

    def deficit(self, a: Attempt) -> int:
        """Milli-GPU the quota checks still miss (a lower bound of what victims must free)."""
        ...

    def allowed(self, a: Attempt, victim: Entry) -> bool:
        """Whether this victim may be taken, given what was removed already."""
        ...


def victim_key(state: State, e: Entry) -> VictimKey:
    """Lowest priority first, Not in Quota first, least work lost, newest."""
    return state.victim_key(e)


def sorted_group(state: State, quota: str, pool: str, niq_only: bool) -> list[Entry]:
    """A group's victims in preference order, sorted once per cycle (groups only shrink)."""
    key = (quota, pool, niq_only)
    got = state.victim_cache.get(key)
    if got is None:
        got = state.victims_at(quota, pool, niq_only)
        state.victim_keys(got)
        got.sort(key=_KEY)
        state.victim_cache[key] = got
    return got


def merged_groups(state: State, pool: str, groups: tuple[tuple[str, bool], ...]) -> list[Entry]:
    """Several groups as one list in preference order, built once per cycle and kept up to
    date as the groups are (victim keys are unique, so this is what merging them gives)."""
    if len(groups) == 1:
        return sorted_group(state, groups[0][0], pool, groups[0][1])
    key = (pool, groups)
    got = state.merged_cache.get(key)
    if got is None:
        got = []
        for q, niq in groups:
            got.extend(sorted_group(state, q, pool, niq))
            state.merged_by_group.setdefault((q, pool, niq), []).append(got)
        got.sort(key=_KEY)  # sorted runs, keys set: timsort merges them
        state.merged_cache[key] = got
    return got


def stream(kind: PreemptionKind, a: Attempt, after: VictimKey | None = None) -> Iterator[Entry]:
    """Live, eligible candidates of every group, merged in preference order (only those
    ranking after the key `after`, when given)."""
    state = a.state
    merged = merged_groups(state, a.pool, tuple(kind.candidates(a)))
    start = 0
    if after is not None:
        start = bisect.bisect_right(merged, after, key=state.victim_key)
    return _eligible(a, islice(merged, start, None))


def _eligible(a: Attempt, ordered: Iterable[Entry]) -> Iterator[Entry]:
    """The live candidates of a run in preference order that the preemptor may evict."""
    state = a.state
    me = a.w.name
    shielded = state.shielded
    entries = state.entries
    below = a.below
    outranks = a.outranks
    in_quota = a.in_quota
    took_in_quota = state.took_in_quota
    for e in ordered:
        w = e.w
        if below is not None and w.priority >= below:
            return  # sorted by priority: nothing further qualifies
        name = w.name
        if entries.get(name) is not e or name == me:
            continue
        # A preemptor keeps its place for the rest of the cycle, except to a workload that
        # would evict it in the next cycle; that one takes its place and its victims now
        # (see Cycle._displace), and they would have been its victims too. In Quota, only
        # one that outranks it and starts In Quota there (of its quota and higher priority,
        # or of a parent with child-level preemption); Not in Quota, any that starts In Quota,
        # if it evicted only workloads that ran Not in Quota (it would reclaim them).
        if name in shielded and not (
            outranks if e.in_quota else (in_quota and name not in took_in_quota)
        ):
            continue
        yield e


def fill(picked: list[Entry], cands: Iterable[Entry], g: int) -> bool:
    """Append candidates until they weigh NODE_SCAN or number WINDOW_MAX; whether they did.

    For a request of whole devices, a candidate holding a fraction of one weighs its share:
    the cheap ones must not crowd out of the window every victim that could free the devices
    the request needs (a reclaim then failed one cycle, or freed a node of 16 victims instead
    of one). Candidates holding no GPU weigh in full: they free CPU and memory only, and
    weighed lighter they made the search slower and the evictions more (cycle bench).
    """
    limit = NODE_SCAN * MILLI
    n = 0
    for e in picked:
        n += _weight(e.req[0], g)
    if n >= limit or len(picked) >= WINDOW_MAX:
        return True
    for e in cands:
        picked.append(e)
        n += _weight(e.req[0], g)
        if n >= limit or len(picked) >= WINDOW_MAX:
            return True
    return False


def _weight(vg: int, g: int) -> int:
    """A candidate holding vg milli-GPU, in a window for a request of g (see fill)."""
    return vg if 0 < vg < MILLI <= g else MILLI


class Window:
    """The first candidates of a victim stream, grouped by the nodes they run on."""

    __slots__ = (
        "cached",
        "entries",
        "last",
        "added",
        "by_node",
        "gpu_nodes",
        "nodes",
        "failed",
        "freed",
        "live",
    )

    def __init__(self, state: State, entries: list[Entry], full: bool, cached: bool) -> None:
        self.cached = cached
        self.entries = entries
        # the victim key of the last candidate when the window is full: changes to entries
        # that sort after it cannot change the window (None: any change can)
        self.last = state.victim_key(entries[-1]) if full else None
        # candidates that changed since (evicted, restored, started, shielded) and rank
        # no later than `last`: the window is repaired from them (see window)
        self.added: list[Entry] = []
        self.by_node: dict[str, list[Entry]] = {}
        # nodes where some candidate holds GPU: elsewhere evictions free CPU and memory only
        self.gpu_nodes: set[str] = set()
        by_node = self.by_node
        gpu_nodes = self.gpu_nodes
        for e in entries:
            holds_gpu = e.req[0] > 0
            for p in e.placements:
                lst = by_node.get(p.node)
                if lst is None:
                    by_node[p.node] = [e]
                elif lst[-1] is not e:
                    lst.append(e)
                if holds_gpu:
                    gpu_nodes.add(p.node)
        # in the window's order: which node comes first never changes the victims chosen
        self.nodes: list[NodeState] = [state.nodes[n] for n in by_node]
        # requests no node of the window could take (static kinds only), valid while
        # none of its nodes gained capacity (the sum of their freed counters is unchanged)
        self.failed: list[tuple[int, int, int]] = []
        self.freed = 0
        # whether the state's windows still hold this one (see window)
        self.live = True

    def freed_now(self) -> int:
        """How often the window's nodes have gained capacity so far."""
        return sum(ns.freed for ns in self.nodes)


def window(kind: PreemptionKind, a: Attempt) -> Window:
    """The stream's first candidates weighing NODE_SCAN (see fill), cached until a change
    reaches them."""
    state = a.state
    me = a.w.name
    g = a.w.request.gpu
    whole = g >= MILLI  # all that fill reads of the request
    groups = tuple(kind.candidates(a))
    key = (
        a.pool,
        groups,
        a.below,
        a.outranks,
        a.in_quota,
        me if me in state.entries else None,
        whole,
    )
    got = state.windows.get(key)
    if got is not None and not got.added:
        return got
    picked: list[Entry] = []
    if got is None or len(got.added) > NODE_SCAN:
        full = fill(picked, stream(kind, a), g)
    else:
        # Every candidate ranking up to the old last one that may have changed is in the
        # old window or among the changed ones; what they lack follows the old last.
        run = {id(e): e for e in (*got.entries, *got.added) if e.key is not None}
        full = fill(picked, _eligible(a, sorted(run.values(), key=_KEY)), g)
        if not full and got.last is not None:
            full = fill(picked, stream(kind, a, got.last), g)
        changed = {id(e) for e in got.added}
        if len(picked) == len(got.entries) and all(
            x is y and id(x) not in changed for x, y in zip(picked, got.entries, strict=True)
        ):
            got.added.clear()  # same candidates, same placements: keep what it learnt
            return got
    if got is not None:
        got.live = False  # replaced: changes need no longer reach it
    got = Window(state, picked, full, True)
    state.windows[key] = got
    for q, niq in groups:
        state.window_groups.setdefault((q, a.pool, niq), []).append(got)
    return got


def search(kind: PreemptionKind, a: Attempt) -> tuple[list[Choice], list[Entry], bool] | None:
    """Evict the fewest, cheapest victims so the preemptor fits; restore all on failure."""
    state = a.state
    if not kind.applies(a):
        return None
    a.outranks = kind.outranks
    a.in_quota = kind.in_quota
    w = a.w
    need = w.request.gpu * a.count
    pool_free = state.capacity[a.pool][0] - state.pool_used[a.pool][0]
    # Cheap bound first: even evicting every candidate would not free enough GPU.
    if need > pool_free and need > pool_free + kind.bound(a):
        return None
    cands: Iterator[Entry] | None = None  # the stream, opened when step 1 needs it
    removed: list[Entry] = []
    existing = state.entries.get(w.name)
    keep = len(existing.placements) if existing is not None else 0

    def fail() -> None:
        state.drop_new_replicas(w, keep)
        for e in reversed(removed):
            state.restore(e)

    # Step 1: quota room (entitlement, borrowable idle, fair share), in batches that free at
    # least the missing amount, so a big deficit costs a few checks, not one per victim.
    label = kind.admissible(a)
    if label is None and kind.deficit(a) > kind.bound(a):
        return None
    while label is None:
        missing = max(1, kind.deficit(a))
        freed = 0
        while freed < missing:
            if cands is None:
                cands = stream(kind, a)
            nxt = next((e for e in cands if kind.allowed(a, e)), None)
            if nxt is None:
                fail()
                return None
            freed += nxt.req[0] * nxt.pool_counts.get(a.pool, 0) or 1
            removed.append(state.remove(nxt.w.name))
        label = kind.admissible(a)
    # Step 2: physical room, one replica at a time, freeing the best single node each time.
    # Without removals so far the first window is the cached one, and the stream resumes
    # after its last candidate (a valid cache holds exactly what the stream yields first;
    # later removals only make candidates ineligible). After evictions the window is
    # refilled only if another replica needs a node freed.
    rest: Iterator[Entry] | None = None  # the stream after the window
    g = w.request.gpu
    if cands is not None:
        picked: list[Entry] = []
        win = Window(state, picked, fill(picked, cands, g), False)
        rest = cands
    else:
        win = window(kind, a)
    req = (w.request.gpu, w.request.cpu, w.request.memory)
    spread = w.kind == "inference"
    placed: list[Choice] = []
    stale = False
    for _ in range(a.count):
        choice = find_node(state, req, [a.pool], spread, w.name)
        if choice is None:
            if stale:
                if rest is None:
                    rest = stream(kind, a, state.victim_key(win.entries[-1]))
                remaining = [e for e in win.entries if state.entries.get(e.w.name) is e]
                win = Window(state, remaining, fill(remaining, rest, g), False)
            victims = _best_node(kind, a, win, req)
            if victims is None:
                fail()
                return None
            for v in victims:
                removed.append(state.remove(v.w.name))
            stale = True
            choice = find_node(state, req, [a.pool], spread, w.name)
            if choice is None:
                fail()
                return None
        state.add_replica(w, choice[0], choice[1], label)
        placed.append(choice)
    removed = _prune(kind, a, removed, placed, keep, label)
    return placed, removed, label


def _prune(
    kind: PreemptionKind,
    a: Attempt,
    removed: list[Entry],
    placed: list[Choice],
    keep: int,
    label: bool,
) -> list[Entry]:
    """Give back every victim the preemptor turns out not to need, most valuable first."""
    state, w = a.state, a.w
    victims = list(removed)
    for v in sorted(removed, key=lambda e: victim_key(state, e), reverse=True):
        if not _fits_back(state, v):
            continue
        state.drop_new_replicas(w, keep)
        state.restore(v)
        if kind.admissible(a) == label:
            victims.remove(v)
        else:
            state.remove(v.w.name)
        for node, devices in placed:
            state.add_replica(w, node, devices, label)
    return victims


def _fits_back(state: State, v: Entry) -> bool:
    """Whether a removed victim's exact devices are all still free."""
    share = v.req[0] if v.req[0] < MILLI else MILLI
    need: dict[str, list[int]] = {}
    for p in v.placements:
        ns = state.nodes[p.node]
        dev = need.setdefault(p.node, [0] * len(ns.dev) + [0, 0])
        for i in p.devices:
            dev[i] += share
        dev[-2] += v.req[1]
        dev[-1] += v.req[2]
    for node, dev in need.items():
        ns = state.nodes[node]
        if dev[-2] > ns.cpu or dev[-1] > ns.mem:
            return False
        if any(dev[i] > ns.dev[i] for i in range(len(ns.dev))):
            return False
    return True


def _best_node(
    kind: PreemptionKind, a: Attempt, win: Window, req: tuple[int, int, int]
) -> list[Entry] | None:
    """The node where the shortest prefix of victims makes one replica fit.

    A request no node of the window could take stays impossible for any request at least as
    large while the window and its nodes only lose capacity (static kinds only).
    """
    static = kind.reason in STATIC_ALLOWED and win.cached
    if static and win.failed:
        if win.freed_now() != win.freed:
            win.failed.clear()
        elif any(f[0] <= req[0] and f[1] <= req[1] and f[2] <= req[2] for f in win.failed):
            return None
    best = _scan_nodes(kind, a, win, req)
    if best is None and static:
        if not win.failed:
            win.freed = win.freed_now()
        win.failed.append(req)
    return best


def _largest(dev: list[int]) -> int:
    """The largest free share of one device (0 without devices); compiled, a plain loop is
    a native one, where max(dev, default=0) is a generic call."""
    top = 0
    for d in dev:
        if d > top:
            top = d
    return top


def _scan_nodes(
    kind: PreemptionKind, a: Attempt, win: Window, req: tuple[int, int, int]
) -> list[Entry] | None:
    """_best_node's search proper, over every node of the window."""
    state = a.state
    by_node = win.by_node
    gpu_nodes = win.gpu_nodes
    # the best is the least (victim count, their victim keys): a later node wins on fewer
    # victims or on smaller keys only, and two nodes that tie on both free the same victims,
    # so the order of the nodes does not matter; keys are computed only when counts tie
    best: list[Entry] | None = None
    best_len = 0
    best_keys: list[VictimKey] | None = None
    g, rc, rm = req
    need_full = g // MILLI if g >= MILLI else 0
    allowed = kind.allowed
    for ns in win.nodes:
        node = ns.name
        if ns.pool != a.pool or not ns.schedulable or not hands_out(ns, g):
            continue
        # without a GPU-holding candidate here the GPU condition below can only hold if it
        # holds already
        if (
            g
            and node not in gpu_nodes
            and (ns.full < need_full if g >= MILLI else not ns.full and _largest(ns.dev) < g)
        ):
            continue
        dev = list(ns.dev)
        cpu, mem = ns.cpu, ns.mem
        # what devices_on(dev, g) needs, kept up to date as victims free devices: the count
        # of whole free devices, and the largest free share of one device
        full = ns.full
        top = MILLI if full else _largest(dev)
        picked: list[Entry] = []
        for v in by_node[node]:
            if best is not None and len(picked) >= best_len:
                break
            if not allowed(a, v):
                continue
            vg = v.req[0]
            share = vg if vg < MILLI else MILLI
            for p in v.placements:
                if p.node == node:
                    for i in p.devices:
                        d = dev[i] + share
                        dev[i] = d
                        if d == MILLI:
                            full += 1
                        if d > top:
                            top = d
                    cpu += v.req[1]
                    mem += v.req[2]
            picked.append(v)
            if (
                cpu >= rc
                and mem >= rm
                and (g == 0 or (full >= need_full if g >= MILLI else top >= g))
            ):
                if best is None or len(picked) < best_len:
                    best, best_len, best_keys = list(picked), len(picked), None
                else:
                    if best_keys is None:
                        best_keys = [victim_key(state, x) for x in best]
                    keys = [victim_key(state, x) for x in picked]
                    if keys < best_keys:
                        best, best_keys = list(picked), keys
                break
    return best
