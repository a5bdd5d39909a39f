"""Expected GPU fragmentation of a node under a target workload, and a placement that descends it.

The measure follows FGD (Weng et al., "Beware of Fragmentation", USENIX ATC'23): for a target
workload M, a distribution over task shapes, the fragmentation of node n is

    F_n(M) = sum over shapes s of p_s * frag_n(s)

where frag_n(s) is all of the node's free milli-GPU when a task of shape s cannot run there at all
(too few devices with enough free share, too little CPU or memory, or the node's GPU model is not
accepted), and otherwise the free milli-GPU on the devices too small for one of its replicas.
A task goes to the node (and device) where F grows least. CPU and memory count, so a node whose CPU
is exhausted strands its GPUs, and a CPU-only task is steered to where it strands the least.

With a `quantum`, increases of F are compared in whole quanta (floor of increase / quantum), so
differences smaller than a quantum, which mostly come from rare multi-GPU shapes, do not decide
and the tighter node wins: FGD's ranking with best-fit inside each step. The paper's own scorer
also compares coarse scores (a sigmoid of the decrease, truncated to integers 0..100, about 40
milli-GPU apart near zero). A share of one GPU is compared in finer steps (`share_quantum`): it
changes one device's free share, so its increases are small and a 40 step would leave most of
them to the tie-break.

Nodes in the same state (pool, free shares per device, CPU, memory) score alike, so the scorer
groups them by that signature and caches F per state and the best move per (state, request).
A sorted list per (pool, request) keeps the states ranked, best last, so a placement looks
only at states new since the last one, and a gone state stays in place: when it comes alive
again, it is ranked already.
For a GPU request ties go first to the state that strands less GPU for lack of CPU (the GPU it
leaves beyond one GPU per STRAND_CPU cores left), then to the tighter state (less left over,
counting STRAND_CPU cores as one GPU, then less CPU left); for a CPU-only one to the tighter
state (less GPU, then CPU left). Then to the state's signature, and within a state to the
first node name: the choice depends on the state only.

This is the live cycle's placement (jobs.scheduling.placement.find_node). An inference replica
adds one term in front of the score: fewer replicas of the same service on the node first, so
its replicas spread over nodes for availability.
"""

from __future__ import annotations

import itertools
import math
import threading
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # a node's working state; typed as the class itself, not a protocol, so that the compiled
    # core reads its fields directly rather than by name
    from .snapshot import NodeState

MILLI = 1000  # milli-GPU per device
# Increases of F are compared in steps of this many milli-GPU: steady across the openb lists
# and seeds (see bench/replay_openb.py); smaller steps let rare multi-GPU shapes decide.
QUANTUM = 40.0
# A share of one GPU's increases are compared in these finer steps: on the gpushare lists 20
# allocates more than 40 (and 10 loses on default), while whole GPUs do best with QUANTUM.
SHARE_QUANTUM = 20.0
# Among equal steps a GPU request goes where it strands less GPU: the milli-GPU a node keeps
# free beyond one milli-GPU per this many milli-CPU left (8 cores per GPU). On the openb lists
# it allocates more on 14 of 18 (up to 0.19 points on the sharing lists); 7 and 8 did best in a
# sweep of 6 to 10; a CPU-only request is left out: steering it to CPU-rich nodes costs the
# CPU-heavy lists (cpu250: 0.7 points). Then it goes where less is left over, the CPU left
# counted at the same rate (rather than the least GPU left): 15 of 18 lists allocate more, up
# to 0.27 points. See bench/replay_openb.py.
STRAND_CPU = 8
_MEMO_KEPT = 200_000  # node states remembered per table of F (tables outlive cycles)
_RANKINGS_KEPT = 4096  # rankings (pool, request) kept per scorer
_SLOTS_KEPT = 50_000  # states a ranking remembers before it starts over
# Gone states a ranking keeps past its best live one: a step past one at each placement is
# cheaper than ranking it again when it comes alive. On bench/cycle.py (a, storm) a cycle ranks
# 1,132 states again instead of 4,713, and steps past 68,850; beyond this many they are dropped,
# so the steps of one placement stay few.
_TAIL_KEPT = 256
_SLACK = 1024  # stale states tolerated before a pool's record or a ranking is rebuilt
_STATES_KEPT = 500_000  # states a shared scorer records before it is started afresh
TOP_SHAPES = 32  # shapes a learned target keeps: the rest are rare, and each costs scoring time

# a task shape before it is weighed: devices, milli-GPU on each, cpu, memory, accepted models
ShapeKey = tuple[int, int, int, int, frozenset[str]]
Req = tuple[int, int, int]  # milli-GPU (a share when < MILLI, else whole devices), cpu, memory
Choice = tuple[str, tuple[int, ...]]
# free shares sorted ascending, CPU, memory, and what the node hands out (HANDS_* bits)
Sig = tuple[tuple[int, ...], int, int, int]
HANDS_SHARES = 1  # fractions of a GPU (time-slicing, MPS)
HANDS_WHOLE = 2  # whole GPUs
HANDS_ANY = HANDS_SHARES | HANDS_WHOLE
# a state's best move for a request: (increase of F in steps, free share of the device taken or
# -1, GPU left, CPU left)
Move = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Shape:
    """One task shape of the target workload with its probability."""

    p: float
    count: int  # devices per task (1 for a shared device)
    share: int  # milli-GPU needed on each of those devices
    cpu: int
    mem: int
    pools: frozenset[str] = frozenset()  # accepted GPU models; empty accepts any


def split_gpu(gpu: int) -> tuple[int, int]:
    """(devices, share per device) of a milli-GPU request: a share below one GPU or whole ones."""
    if gpu <= 0:
        return 0, 0
    if gpu < MILLI:
        return 1, gpu
    return gpu // MILLI, MILLI


def target_workload(
    pods: Iterable[tuple[int, int, int, Sequence[str]]], *, memory: bool = True
) -> list[Shape]:
    """The distribution of GPU task shapes (milli-GPU, cpu, memory, accepted models) in a pod list,
    each weighted by its pods per device (see task_weight).

    CPU-only tasks are left out: every node's free GPU is equally useless to them, so they only
    add the same amount to each candidate's increase. Without `memory` shapes ignore memory.
    """
    counts: dict[ShapeKey, int] = {}
    for gpu, cpu, mem, spec in pods:
        n, share = split_gpu(gpu)
        if n == 0:
            continue
        key = (n, share, cpu, mem if memory else 0, frozenset(spec))
        counts[key] = counts.get(key, 0) + 1
    return _weighed(counts.items())


def popular_shapes(
    counts: Iterable[tuple[int, int, int, int]], top: int = TOP_SHAPES
) -> tuple[Shape, ...]:
    """The `top` most requested GPU task shapes of (milli-GPU, cpu, memory, tasks) rows, each
    weighted by its tasks per device (see task_weight), heaviest first. CPU-only rows are left
    out."""
    tasks: dict[ShapeKey, int] = {}
    for gpu, cpu, mem, n in counts:
        count, share = split_gpu(gpu)
        if count and n > 0:
            key: ShapeKey = (count, share, cpu, mem, frozenset())
            tasks[key] = tasks.get(key, 0) + n
    return tuple(_weighed(sorted(tasks.items(), key=lambda kv: (-kv[1], kv[0][:4]))[:top]))


def task_weight(devices: int) -> float:
    """What one task of a shape weighs in the target: 1 over the devices it takes.

    FGD weighs a shape by its tasks. A shape of k whole devices counts all of a node's free GPU
    as fragment wherever fewer than k devices are free, so by tasks alone a rare 8-GPU shape
    keeps every whole node from being touched; per device, it weighs as its demand on a node
    does. On the openb lists (130%, 10 seeds) this allocates 0.17 to 0.22 points more on the
    multi-GPU lists and gives 0.16 to 0.32 back on three gpuspec lists, within 0.07 elsewhere.
    """
    return 1.0 / devices


def _weighed(tasks: Iterable[tuple[ShapeKey, int]]) -> list[Shape]:
    """Shapes of (shape, tasks) pairs, each weighted by its tasks per device, heaviest first."""
    weights = [(task_weight(key[0]) * n, key) for key, n in tasks]
    weights.sort(key=lambda wk: (-wk[0], sorted(wk[1][4]), wk[1][:4]))
    total = sum(w for w, _ in weights)
    return [Shape(w / total, *key) for w, key in weights]


# The target of a cluster with no recent submissions: GPU shapes as on the openb default trace
# rounded (of 100 tasks, 50 take one whole GPU, 35 share one, 15 take 2, 4 or 8), with no CPU or
# memory demand. The bridge replaces it with the cluster's own.
DEFAULT_TARGET: tuple[Shape, ...] = popular_shapes(
    (
        (MILLI, 0, 0, 50),
        (500, 0, 0, 15),
        (250, 0, 0, 10),
        (800, 0, 0, 10),
        (2 * MILLI, 0, 0, 7),
        (4 * MILLI, 0, 0, 5),
        (8 * MILLI, 0, 0, 3),
    )
)


def shape_fragment(
    dev: Sequence[int], cpu: int, mem: int, pool: str, s: Shape, hands: int = HANDS_ANY
) -> int:
    """Free milli-GPU of a node that one task of shape s could not use."""
    free = sum(dev)
    if s.pools and pool not in s.pools:
        return free
    if not hands & (HANDS_WHOLE if s.share == MILLI else HANDS_SHARES):
        return free
    if s.cpu > cpu or s.mem > mem:
        return free
    usable = 0
    small = 0
    for d in dev:
        if d >= s.share:
            usable += 1
        else:
            small += d
    return free if usable < s.count else small


def fragmentation(
    dev: Sequence[int],
    cpu: int,
    mem: int,
    pool: str,
    shapes: Sequence[Shape],
    hands: int = HANDS_ANY,
) -> float:
    """F_n(M): the expected milli-GPU of the node that a task drawn from M could not use."""
    if sum(dev) == 0:
        return 0.0
    return sum(s.p * shape_fragment(dev, cpu, mem, pool, s, hands) for s in shapes)


class _Table:
    """F per node state for one pool, computed on demand from a compact form of the shapes."""

    __slots__ = ("rows", "memo")

    def __init__(self, pool: str, shapes: Sequence[Shape]) -> None:
        # shapes that cannot run in this pool always see the whole free GPU as fragment
        merged: dict[tuple[int, int, int, int], float] = {}
        blocked = 0.0
        for s in shapes:
            if s.pools and pool not in s.pools:
                blocked += s.p
                continue
            k = (s.count, s.share, s.cpu, s.mem)
            merged[k] = merged.get(k, 0.0) + s.p
        self.rows = [(p, n, share, cpu, mem) for (n, share, cpu, mem), p in merged.items()]
        if blocked:
            self.rows.append((blocked, 1 << 30, MILLI, 0, 0))
        self.memo: dict[Sig, float] = {}

    def frag(self, sig: Sig) -> float:
        got = self.memo.get(sig)
        if got is not None:
            return got
        if len(self.memo) >= _MEMO_KEPT:
            self.memo.clear()  # tables outlive cycles: a long-running process stays bounded
        dev, cpu, mem, hands = sig
        free = sum(dev)
        out = 0.0
        if free:
            # dev is sorted ascending: devices with at least `share` free are a suffix
            for p, n, share, c, m in self.rows:
                if (
                    c > cpu
                    or m > mem
                    or not hands & (HANDS_WHOLE if share == MILLI else HANDS_SHARES)
                ):
                    out += p * free
                    continue
                small = 0
                usable = len(dev)
                for d in dev:
                    if d >= share:
                        break
                    small += d
                    usable -= 1
                out += p * (free if usable < n else small)
        self.memo[sig] = out
        return out


# F per state depends on the pool and the target only: tables outlive a scorer, so cycle after
# cycle on the same target reuses what earlier cycles computed (a few targets at most are live)
_TABLES: dict[tuple[str, tuple[Shape, ...]], _Table] = {}
_TABLES_KEPT = 64


def _table(pool: str, shapes: tuple[Shape, ...]) -> _Table:
    """The shared table of F for a pool and a target."""
    key = (pool, shapes)
    got = _TABLES.get(key)
    if got is None:
        if len(_TABLES) >= _TABLES_KEPT:
            _TABLES.clear()
        got = _TABLES[key] = _Table(pool, shapes)
    return got


def _klass(sig: Sig) -> int:
    """A state's class for the requests it may fit: with k whole devices free 20 + k, else the
    free milli-GPU of its freest device in steps of 50 (0..19)."""
    dev = sig[0]  # ascending
    if not dev:
        return 0
    if dev[-1] < MILLI:
        return dev[-1] // _STEP
    k = 0
    for d in dev:
        if d == MILLI:
            k += 1
    return _WHOLE + k


def _lowest(gpu: int) -> int:
    """The lowest class of states a request for gpu milli-GPU may fit."""
    if gpu <= 0:
        return 0
    return gpu // _STEP if gpu < MILLI else _WHOLE + gpu // MILLI


_STEP = 50  # milli-GPU per class of partly free states
_WHOLE = MILLI // _STEP  # classes below are partly free states, from here whole devices


def hands(shares: bool, whole: bool) -> int:
    """The HANDS_* bits of a node whose device plugin hands out fractions and/or whole GPUs."""
    return (HANDS_SHARES if shares else 0) | (HANDS_WHOLE if whole else 0)


def _signature(ns: NodeState) -> Sig:
    return (tuple(sorted(ns.dev)), ns.cpu, ns.mem, hands(ns.shares, ns.whole))


class _State:
    """One distinct node state the scorer has seen in a pool: its signature, its class (_klass)
    and the nodes in it now (none: the state is gone). Rankings keep their slot of it on the
    record and read whether it is live from it: no nested tuple is hashed at each lookup."""

    __slots__ = ("sig", "klass", "order", "exact", "serial", "members", "slots")

    def __init__(self, sig: Sig, serial: int) -> None:
        self.sig = sig
        self.klass = _klass(sig)
        self.order = _order(sig)
        # whether the order tells this state apart from every other (see _order)
        self.exact = _exact(sig)
        self.serial = serial  # tells apart the entries of states whose order ties
        self.members: dict[str, NodeState] = {}
        # the slot each ranking keeps of it, by the ranking's number: kept with the state, as
        # a ranking looks up mostly states just born, whose record is at hand
        self.slots: dict[int, _Slot] = {}


class _Filed:
    """Where the scorer filed a node (pool and state) and its devices' free shares in device
    order, so a sync tells an unchanged node without building its signature."""

    __slots__ = ("pool", "state", "dev", "synced")

    def __init__(self, ns: NodeState, state: _State, synced: int) -> None:
        self.pool = ns.pool
        self.state = state
        self.dev = list(ns.dev)
        self.synced = synced  # the last sync that found the node

    def move(self, ns: NodeState, state: _State) -> None:
        """Record the node in another state."""
        self.pool = ns.pool
        self.state = state
        self.dev[:] = ns.dev

    def holds(self, ns: NodeState, hands_bits: int) -> bool:
        """Whether ns is in the state filed here."""
        sig = self.state.sig
        return (
            ns.cpu == sig[1]
            and ns.mem == sig[2]
            and hands_bits == sig[3]
            and ns.pool == self.pool
            and ns.dev == self.dev
        )


class _Slot:
    """What a ranking knows of one state: the state, its entry (None when the request does
    not fit it), the free share of the device the request takes there (-1: whole devices) and
    whether the ranking holds the entry now."""

    __slots__ = ("state", "entry", "share", "inside")

    def __init__(self, state: _State) -> None:
        self.state = state
        self.entry: int | None = None
        self.share = -1
        self.inside = False


class _Ranking:
    """The states of one pool ranked for one request: their entries in ascending order, the
    best last, and at the same positions their slots (a list, not a map: no entry is hashed).
    Entries of gone states stay where they are, also past the best live one while fewer than
    _TAIL_KEPT are there (or until the list outgrows the live states and is rebuilt)."""

    __slots__ = ("number", "ranked", "held", "lowest", "seen", "states", "top")

    def __init__(self, number: int, lowest: int) -> None:
        self.number = number  # its key in a state's slots
        self.ranked: list[int] = []
        self.held: list[_Slot] = []  # the slot of each entry
        self.lowest = lowest  # the first class of states the request can fit (see _klass)
        self.seen: list[int] = []  # per class, how many of the pool's born states it has seen
        self.states: list[_State] = []  # the states it keeps a slot of
        self.top = -1  # where its best live state is, once caught up (-1: none is live)

    def drop(self) -> None:
        """Take its slots off the states, when the scorer lets it go."""
        for st in self.states:
            del st.slots[self.number]


class FragmentationScorer:
    """Place tasks one by one on the node whose fragmentation F grows least.

    Increases of F are compared exactly, or in whole multiples of `quantum` milli-GPU when it is
    positive (`share_quantum` for a share of one GPU). Ties go to the node that strands less GPU
    for lack of CPU, then to the one with less left over (CPU counted as GPU at STRAND_CPU
    cores per GPU; a CPU-only request: less free GPU), then less CPU left, then to the state
    signature, then to the node name. Call
    `update(node)` after changing a node's free resources, or `sync(nodes)` to take another set
    of nodes as the cluster: what the scorer ranked stays valid, since it depends on node states
    only.

    Each distinct state gets a record (_State) when first seen, so the bookkeeping of rankings
    hashes addresses rather than the nested tuples of a signature.
    """

    def __init__(
        self,
        nodes: Iterable[NodeState],
        shapes: Sequence[Shape],
        quantum: float = QUANTUM,
        share_quantum: float = SHARE_QUANTUM,
    ) -> None:
        for name, q in (("quantum", quantum), ("share_quantum", share_quantum)):
            if q < 0:
                raise ValueError(f"{name} must be 0 or more, got {q}")
        self.shapes = tuple(shapes)
        self.quantum = quantum
        self.share_quantum = share_quantum
        self.states: dict[str, dict[Sig, _State]] = {}  # pool -> every state seen there
        # node name -> where it is filed (pool, state)
        self.where: dict[str, _Filed] = {}
        # pool -> its live states (those with members), in the order they came alive
        self.live: dict[str, dict[_State, None]] = {}
        # pool -> class -> states in the order they came alive (rankings catch up on the
        # classes their request can fit)
        self.born: dict[str, list[list[_State]]] = {}
        self.tables: dict[str, _Table] = {}
        self.rankings: dict[tuple[str, Req], _Ranking] = {}
        self.made = 0  # states recorded so far (each one's serial)
        self.numbered = 0  # rankings made so far (each one's number)
        self.owner = 0  # which working state last synced it (see shared_scorer)
        self.syncs = 0  # syncs so far
        self.sync(nodes)

    def sync(self, nodes: Iterable[NodeState]) -> None:
        """Take these nodes as the cluster: re-file the ones whose state is new to the scorer,
        drop the ones gone, and keep every ranking and move computed so far."""
        self.syncs += 1
        found = 0
        for ns in nodes:
            if not ns.schedulable:
                continue
            name = ns.name
            found += 1
            at = self.where.get(name)
            if at is not None:
                at.synced = self.syncs
                if at.holds(ns, hands(ns.shares, ns.whole)):
                    at.state.members[name] = ns  # the same state in a new working copy
                    continue
                self._leave(name, at)
                st = self._state(ns.pool, _signature(ns))
                at.move(ns, st)
            else:
                st = self._state(ns.pool, _signature(ns))
                self.where[name] = _Filed(ns, st, self.syncs)
            self._join(ns, st)
        if found < len(self.where):
            for name in [n for n, at in self.where.items() if at.synced != self.syncs]:
                self._leave(name, self.where.pop(name))

    def _state(self, pool: str, sig: Sig) -> _State:
        known = self.states.get(pool)
        if known is None:
            known = self.states[pool] = {}
        st = known.get(sig)
        if st is None:
            st = known[sig] = _State(sig, self.made)
            self.made += 1
        return st

    def state_count(self) -> int:
        """States seen, over all pools (none is ever forgotten, so the serials count them)."""
        return self.made

    def _join(self, ns: NodeState, st: _State) -> None:
        """Put a node into a state, which comes alive if no node was in it."""
        pool = ns.pool
        live = self.live.get(pool)
        if live is None:
            live = self.live[pool] = {}
            self.born[pool] = []
            self.tables[pool] = _table(pool, self.shapes)
        members = st.members
        if not members:
            live[st] = None
            lists = self.born[pool]
            k = st.klass
            while len(lists) <= k:
                lists.append([])
            lists[k].append(st)
            if len(lists[k]) >= 4 * len(live) + _SLACK:
                self._restart(pool)
        members[ns.name] = ns

    def _restart(self, pool: str) -> None:
        """Most states the pool has seen are gone: start its record over from the live ones,
        and let its rankings look again at those (their entries are kept)."""
        lists = self.born[pool]
        for born in lists:
            born.clear()
        for st in self.live[pool]:
            lists[st.klass].append(st)
        for (p, _), rank in self.rankings.items():
            if p == pool:
                rank.seen = [0] * len(lists)

    def _leave(self, name: str, at: _Filed) -> None:
        """Take a node out of the state it is filed in, which is gone if no node is left."""
        members = at.state.members
        del members[name]
        if not members:
            del self.live[at.pool][at.state]

    def update(self, ns: NodeState) -> None:
        """Re-file a node whose free resources changed."""
        at = self.where.get(ns.name)
        if at is None:
            return
        st = self._state(ns.pool, _signature(ns))
        if st is at.state:
            return
        self._leave(ns.name, at)
        at.move(ns, st)
        self._join(ns, st)

    def _look(self, pool: str, req: Req, rank: _Ranking, fresh: list[_State], start: int) -> None:
        """Rank the states fresh[start:] that are live and not ranked yet."""
        ranked = rank.ranked
        number = rank.number
        for i in range(start, len(fresh)):
            st = fresh[i]
            # most states born since the last look are gone again (trial placements)
            if not st.members:
                continue
            slot = st.slots.get(number)
            if slot is None:
                slot = st.slots[number] = _Slot(st)
                rank.states.append(st)
                self._enter(pool, slot, req)
            elif slot.inside:
                continue
            entry = slot.entry
            if entry is not None:
                at = bisect_right(ranked, entry)
                ranked.insert(at, entry)
                rank.held.insert(at, slot)
                slot.inside = True

    def _enter(self, pool: str, slot: _Slot, req: Req) -> None:
        """Set a new slot's entry and share; the entry stays None when req does not fit.

        The entry is one integer, lower for a worse move: minus the move's _key, then the
        state's order, then its serial (which only states with equal orders need). Compared
        as integers, entries sort without walking tuples, and the best is last."""
        st = slot.state
        mv = self._evaluate(pool, st.sig, req)
        if mv is None:
            return
        key = _gpu_key(mv[0], mv[2], mv[3]) if req[0] > 0 else _key(mv[0], 0, mv[2], mv[3])
        slot.entry = -((((key << _ORDER_BITS) + st.order) << _SERIAL_BITS) + st.serial)
        slot.share = mv[1]

    @staticmethod
    def _step(delta: float, quantum: float) -> int:
        """The increase of F as compared: in whole quanta, or in millionths of a milli-GPU
        without a quantum (either way float noise is rounded off first)."""
        exact = round(delta, 6)
        return math.floor(exact / quantum) if quantum else round(exact * 1_000_000)

    def _evaluate(self, pool: str, sig: Sig, req: Req) -> Move | None:
        dev, cpu, mem, hands = sig
        gpu, c, m = req
        if c > cpu or m > mem:
            return None
        n, share = split_gpu(gpu)
        if n and not hands & (HANDS_WHOLE if share == MILLI else HANDS_SHARES):
            return None  # the device plugin does not hand out this kind of GPU here
        table = self.tables[pool]
        before = table.frag(sig)
        free = sum(dev)
        best: Move | None = None
        if n == 0:
            delta = table.frag((dev, cpu - c, mem - m, hands)) - before
            return (self._step(delta, self.quantum), -1, free, cpu - c)
        if share == MILLI:
            whole = sum(1 for d in dev if d == MILLI)
            if whole < n:
                return None
            after = tuple(sorted(dev[: len(dev) - n] + (0,) * n))
            delta = table.frag((after, cpu - c, mem - m, hands)) - before
            left = free - gpu
            return (self._step(delta, self.quantum), -1, left, cpu - c)
        seen = -1
        for i, d in enumerate(dev):
            if d < share or d == seen:
                continue
            seen = d
            rest = list(dev[:i] + dev[i + 1 :])
            rest.append(d - share)
            rest.sort()
            delta = table.frag((tuple(rest), cpu - c, mem - m, hands)) - before
            left = free - share
            cand = (self._step(delta, self.share_quantum), d, left, cpu - c)
            if best is None or cand < best:
                best = cand
        return best

    def _ranked(self, pool: str, req: Req) -> _Ranking:
        """The pool's states ranked for req, caught up with the states new since."""
        live = self.live[pool]
        lists = self.born[pool]
        key = (pool, req)
        rank = self.rankings.get(key)
        if rank is not None and len(rank.states) >= _SLOTS_KEPT:
            rank.drop()  # a long-lived ranking stays bounded: start it over
            rank = None
        if rank is None:
            if len(self.rankings) >= _RANKINGS_KEPT:
                for old in self.rankings.values():
                    old.drop()
                self.rankings.clear()
            self.numbered += 1
            rank = self.rankings[key] = _Ranking(self.numbered, _lowest(req[0]))
            rank.seen = [len(born) for born in lists]
            self._look(pool, req, rank, list(live), 0)
        else:
            seen = rank.seen
            while len(seen) < len(lists):
                seen.append(0)
            for k in range(rank.lowest, len(lists)):
                born = lists[k]
                if seen[k] < len(born):
                    start = seen[k]
                    seen[k] = len(born)
                    self._look(pool, req, rank, born, start)
        ranked = rank.ranked
        held = rank.held
        if len(ranked) > 2 * len(live) + _SLACK:
            # mostly stale: keep the live states only
            kept: list[int] = []
            kept_slots: list[_Slot] = []
            for i, slot in enumerate(held):
                if slot.state.members:
                    kept.append(ranked[i])
                    kept_slots.append(slot)
                else:
                    slot.inside = False
            ranked[:] = kept
            held[:] = kept_slots
        # states that no node is in any more stay at the end while they are few: one that
        # comes alive again is ranked already, and a walk past the gone is cheaper
        top = len(held) - 1
        while top >= 0 and not held[top].state.members:
            top -= 1
        if len(held) - 1 - top > _TAIL_KEPT:
            for slot in held[top + 1 :]:
                slot.inside = False
            del held[top + 1 :]
            del ranked[top + 1 :]
        rank.top = top
        return rank

    def _best(self, rank: _Ranking) -> _Slot:
        """The best live slot of a caught-up ranking with one: at `top`, unless states
        beyond what the order encodes tie with it (then the least signature)."""
        ranked = rank.ranked
        top = rank.top
        best = rank.held[top]
        if best.state.exact:
            return best
        head = _head(ranked[top])
        for i in range(top - 1, -1, -1):
            if _head(ranked[i]) != head:
                break
            slot = rank.held[i]
            if slot.state.members and slot.state.sig < best.state.sig:
                best = slot
        return best

    def _spread(self, rank: _Ranking, owner: str) -> tuple[int, _Slot, NodeState] | None:
        """The best state with a node free of owner's replicas (or the fewest of them)."""
        ranked = rank.ranked
        best: tuple[int, _Slot, NodeState] | None = None
        head = 0  # the best's entry without its serial, read only when its order may tie
        for i in range(rank.top, -1, -1):  # the states past the best live one are gone
            slot = rank.held[i]
            members = slot.state.members
            if not members:
                continue
            # only a state beyond what the order encodes ties with another (see _best)
            tied = best is not None and not best[1].state.exact and _head(ranked[i]) == head
            if best is not None and best[0] == 0 and not tied:
                break  # nothing further down beats a state free of its replicas
            ns = min(members.values(), key=lambda n: (n.residents.get(owner, 0), n.name))
            mine = ns.residents.get(owner, 0)
            if (
                best is None
                or mine < best[0]
                or (mine == best[0] and tied and slot.state.sig < best[1].state.sig)
            ):
                best = (mine, slot, ns)
                if not slot.state.exact:
                    head = _head(ranked[i])
        return best

    def choose(
        self, req: Req, pools: Sequence[str], spread_owner: str | None = None
    ) -> Choice | None:
        """The node and devices for one task over the accepted pools; None when nothing fits.

        With spread_owner (an inference service), nodes with fewer of its replicas come first.
        """
        n, share = split_gpu(req[0])
        best: tuple[int, _Slot, NodeState] | None = None
        for pool in pools:
            if pool not in self.live:
                continue
            rank = self._ranked(pool, req)
            if rank.top < 0:
                continue
            if spread_owner is not None:
                found = self._spread(rank, spread_owner)
                if found is None:
                    continue
            else:
                top = self._best(rank)
                found = (0, top, _first_named(top.state))
            if best is None or _pool_key(found) < _pool_key(best):
                best = found
        if best is None:
            return None
        ns = best[2]
        return ns.name, _devices(ns.dev, n, share, best[1].share)


def _gpu_key(step: int, gpu_left: int, cpu_left: int) -> int:
    """The rank of a GPU request's move: after the step, the milli-GPU the node keeps beyond
    what its CPU left serves at STRAND_CPU per GPU (stranded), then what it keeps in all, its
    CPU left counted at that rate, then its CPU left."""
    served = cpu_left // STRAND_CPU
    return _key(step, max(0, gpu_left - served), gpu_left + served, cpu_left)


def _key(step: int, strand: int, left: int, cpu_left: int) -> int:
    """A move's rank as one integer, ordered as (step, GPU stranded, what is left, CPU left):
    rankings compare one number instead of walking tuples."""
    ranked = (step << 20) + min(strand, _GPU_CAP)
    return (((ranked << 20) + min(left, _GPU_CAP)) << 24) + min(cpu_left, _CPU_CAP)


_GPU_CAP = (1 << 20) - 1  # milli-GPU (CPU counted in) left on a node, far above any node's
_CPU_CAP = (1 << 24) - 1


def _order(sig: Sig) -> int:
    """An integer that orders states as their signatures do, or ties where it cannot tell them
    apart (then the signature decides): a ranking of mostly equal moves compares integers
    instead of walking nested tuples."""
    dev, cpu, mem, hands_bits = sig
    # a device's free share plus one, and 0 past the last device, so that a prefix sorts first
    values = [dev[i] + 1 if i < len(dev) else 0 for i in range(_DIGITS)]
    values += [cpu, mem, hands_bits]
    if len(dev) > _DIGITS:
        values[_DIGITS] = 1 << 64  # devices beyond those encoded: the rest saturates
    out = 0
    # -1 or 1 once a value fell below or above its field: the fields after take their least or
    # their greatest value
    past = 0
    for value, bits in zip(values, _FIELD_BITS, strict=True):
        top = (1 << bits) - 1
        if past:
            value = 0 if past < 0 else top
        elif value < 0:
            value, past = 0, -1
        elif value > top:
            value, past = top, 1
        out = (out << bits) + value
    return out


_DIGITS = 16  # devices a state's order encodes
# bits of its fields: each device's free share plus one (up to MILLI + 1), CPU, memory and
# what the node hands out
_FIELD_BITS = (10,) * _DIGITS + (24, 32, 2)
_ORDER_BITS = sum(_FIELD_BITS)


_SERIAL_BITS = 32  # bits of a state's serial in an entry (a scorer records far fewer)


def _exact(sig: Sig) -> bool:
    """Whether a state's order is its alone: its devices and values all within what the order
    encodes exactly (a value at its field's cap could stand for one beyond it)."""
    return (
        len(sig[0]) <= _DIGITS
        and 0 <= sig[1] < (1 << _FIELD_BITS[_DIGITS]) - 1
        and 0 <= sig[2] < (1 << _FIELD_BITS[_DIGITS + 1]) - 1
    )


def _head(entry: int) -> int:
    """An entry without its serial: equal for states whose moves and orders tie."""
    return (-entry) >> _SERIAL_BITS


def _entry_of(slot: _Slot) -> int:
    """The entry of a slot that has one."""
    assert slot.entry is not None, "a ranked slot has an entry"
    return slot.entry


def _pool_key(found: tuple[int, _Slot, NodeState]) -> tuple[int, int, Sig, str]:
    """How the best states of two pools compare: replicas of the service, move and order, then
    signature (a signature may be live in two pools, each with its own _State), then node."""
    mine, slot, ns = found
    return (mine, _head(_entry_of(slot)), slot.state.sig, ns.name)


def _first_named(st: _State) -> NodeState:
    """The node of a live state whose name sorts first."""
    first: NodeState | None = None
    for ns in st.members.values():
        if first is None or ns.name < first.name:
            first = ns
    assert first is not None, "a live state has a node"
    return first


# One scorer per thread and target, kept from cycle to cycle: consecutive cycles see mostly the
# same node states, so their rankings carry over and a cycle pays only for the states it changes.
_LOCAL = threading.local()
_SERIAL = itertools.count(1)


def new_owner() -> int:
    """A token for one working state, so a shared scorer knows whose nodes it holds."""
    return next(_SERIAL)


def shared_scorer(
    nodes: Iterable[NodeState], shapes: tuple[Shape, ...], owner: int
) -> FragmentationScorer:
    """This thread's scorer for the target, synced to `nodes` unless `owner` synced it last."""
    scorer: FragmentationScorer | None = getattr(_LOCAL, "scorer", None)
    if scorer is None or scorer.shapes != shapes or scorer.state_count() > _STATES_KEPT:
        scorer = FragmentationScorer(nodes, shapes)
        _LOCAL.scorer = scorer
    elif scorer.owner != owner:
        scorer.sync(nodes)
    scorer.owner = owner
    return scorer


def _devices(dev: Sequence[int], n: int, share: int, taken: int) -> tuple[int, ...]:
    """Device indices on the node: the first n whole ones, or the first with `taken` free."""
    if n == 0:
        return ()
    if share == MILLI:
        return tuple([i for i, d in enumerate(dev) if d == MILLI][:n])
    return (next(i for i, d in enumerate(dev) if d == taken),)
