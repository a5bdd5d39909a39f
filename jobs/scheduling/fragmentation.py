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
also compares coarse scores (a sigmoid of the decrease, truncated to integers 0..100).

Nodes in the same state (pool, free shares per device, CPU, memory) score alike, so the scorer
groups them by that signature and caches F per state and the best move per (state, request).
A heap per (pool, request) keeps the states ranked, so a placement looks only at states new
since the last one. Ties go to the tighter state (less GPU, then CPU left), then to the state's
signature, and within a state to the first node name: the choice depends on the state only.

This is the live cycle's placement (jobs.scheduling.placement.find_node). An inference replica
adds one term in front of the score: fewer replicas of the same service on the node first, so
its replicas spread over nodes for availability.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

MILLI = 1000  # milli-GPU per device
# Increases of F are compared in steps of this many milli-GPU: steady across the openb lists
# and seeds (see bench/replay_openb.py); smaller steps let rare multi-GPU shapes decide.
QUANTUM = 40.0
_MEMO_KEPT = 200_000  # node states remembered per table of F (tables outlive cycles)
TOP_SHAPES = 32  # shapes a learned target keeps: the rest are rare, and each costs scoring time

Req = tuple[int, int, int]  # milli-GPU (a share when < MILLI, else whole devices), cpu, memory
Choice = tuple[str, tuple[int, ...]]
# free shares sorted ascending, CPU, memory, and what the node hands out (HANDS_* bits)
Sig = tuple[tuple[int, ...], int, int, int]
HANDS_SHARES = 1  # fractions of a GPU (time-slicing, MPS)
HANDS_WHOLE = 2  # whole GPUs
HANDS_ANY = HANDS_SHARES | HANDS_WHOLE
# a ranked state: (increase of F in steps, GPU left, CPU left, signature, free share taken)
Ranked = tuple[float, int, int, Sig, int]


@dataclass(frozen=True, slots=True)
class Shape:
    """One task shape of the target workload with its probability."""

    p: float
    count: int  # devices per task (1 for a shared device)
    share: int  # milli-GPU needed on each of those devices
    cpu: int
    mem: int
    pools: frozenset[str] = frozenset()  # accepted GPU models; empty accepts any


class NodeView(Protocol):
    """What the scorer reads from a node's working state."""

    @property
    def name(self) -> str: ...
    @property
    def pool(self) -> str: ...
    @property
    def dev(self) -> Sequence[int]: ...
    @property
    def cpu(self) -> int: ...
    @property
    def mem(self) -> int: ...
    @property
    def schedulable(self) -> bool: ...
    @property
    def residents(self) -> dict[str, int]: ...
    @property
    def shares(self) -> bool: ...
    @property
    def whole(self) -> bool: ...


def split_gpu(gpu: int) -> tuple[int, int]:
    """(devices, share per device) of a milli-GPU request: a share below one GPU or whole ones."""
    if gpu <= 0:
        return 0, 0
    if gpu < MILLI:
        return 1, gpu
    return gpu // MILLI, MILLI


def target_workload(
    pods: Iterable[tuple[int, int, int, Sequence[str]]],
    *,
    memory: bool = True,
    gpu_weight: float = 0.0,
) -> list[Shape]:
    """The distribution of GPU task shapes (milli-GPU, cpu, memory, accepted models) in a pod list.

    CPU-only tasks are left out: every node's free GPU is equally useless to them, so they only
    add the same amount to each candidate's increase. Without `memory` shapes ignore memory.
    With `gpu_weight` a shape counts its pods times (its milli-GPU) ** gpu_weight, so shapes
    that carry more of the GPU demand weigh more (0 is FGD's popularity by pod count, which
    allocates the most on openb once increases are compared in quanta; see bench/replay_openb.py).
    """
    counts: dict[tuple[int, int, int, int, frozenset[str]], int] = {}
    for gpu, cpu, mem, spec in pods:
        n, share = split_gpu(gpu)
        if n == 0:
            continue
        key = (n, share, cpu, mem if memory else 0, frozenset(spec))
        counts[key] = counts.get(key, 0) + 1
    weights = {k: c * float(k[0] * k[1]) ** gpu_weight for k, c in counts.items()}
    total = sum(weights.values())
    if total == 0:
        return []
    ordered = sorted(weights.items(), key=lambda kv: (-kv[1], sorted(kv[0][4]), kv[0][:4]))
    return [Shape(w / total, n, s, cpu, mem, pools) for (n, s, cpu, mem, pools), w in ordered]


def popular_shapes(
    counts: Iterable[tuple[int, int, int, int]], top: int = TOP_SHAPES
) -> tuple[Shape, ...]:
    """The `top` most requested GPU task shapes of (milli-GPU, cpu, memory, tasks) rows, each
    weighted by its share of those shapes' tasks: FGD's popularity. CPU-only rows are left out."""
    tasks: dict[tuple[int, int, int, int], int] = {}
    for gpu, cpu, mem, n in counts:
        count, share = split_gpu(gpu)
        if count and n > 0:
            key = (count, share, cpu, mem)
            tasks[key] = tasks.get(key, 0) + n
    ranked = sorted(tasks.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    total = sum(n for _, n in ranked)
    return tuple(Shape(n / total, *key) for key, n in ranked)


# The target of a cluster with no recent submissions: GPU shapes by popularity, as on the openb
# default trace rounded (half of the tasks take one whole GPU, a third share one, the rest take
# 2, 4 or 8), with no CPU or memory demand. The bridge replaces it with the cluster's own.
DEFAULT_TARGET: tuple[Shape, ...] = (
    Shape(0.50, 1, MILLI, 0, 0),
    Shape(0.15, 1, 500, 0, 0),
    Shape(0.10, 1, 250, 0, 0),
    Shape(0.10, 1, 800, 0, 0),
    Shape(0.07, 2, MILLI, 0, 0),
    Shape(0.05, 4, MILLI, 0, 0),
    Shape(0.03, 8, MILLI, 0, 0),
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


def _signature(ns: NodeView) -> Sig:
    hands = (HANDS_SHARES if ns.shares else 0) | (HANDS_WHOLE if ns.whole else 0)
    return (tuple(sorted(ns.dev)), ns.cpu, ns.mem, hands)


class FragmentationScorer:
    """Place tasks one by one on the node whose fragmentation F grows least.

    Increases of F are compared exactly, or in whole multiples of `quantum` milli-GPU when it is
    positive. Ties go to the tighter node (less free GPU left, then less CPU left), then to the
    state signature, then to the node name. Call `update(node)` after changing a node's free
    resources.
    """

    def __init__(
        self, nodes: Iterable[NodeView], shapes: Sequence[Shape], quantum: float = QUANTUM
    ) -> None:
        if quantum < 0:
            raise ValueError(f"quantum must be 0 or more, got {quantum}")
        self.shapes = tuple(shapes)
        self.quantum = quantum
        self.sig: dict[str, Sig] = {}
        # pool -> signature -> nodes in that state
        self.groups: dict[str, dict[Sig, dict[str, NodeView]]] = {}
        # pool -> signatures in the order their groups appeared (ranked heaps catch up on it)
        self.born: dict[str, list[Sig]] = {}
        self.tables: dict[str, _Table] = {}
        self.moves: dict[tuple[str, Sig, Req], tuple[float, int, int, int] | None] = {}
        # (pool, request) -> (heap of ranked states, how many of born[pool] it has seen)
        self.heaps: dict[tuple[str, Req], tuple[list[Ranked], list[int]]] = {}
        for ns in nodes:
            if not ns.schedulable:
                continue
            if ns.pool not in self.groups:
                self.groups[ns.pool] = {}
                self.born[ns.pool] = []
                self.tables[ns.pool] = _table(ns.pool, self.shapes)
            self._file(ns, _signature(ns))

    def _file(self, ns: NodeView, sig: Sig) -> None:
        groups = self.groups[ns.pool]
        members = groups.get(sig)
        if members is None:
            members = groups[sig] = {}
            self.born[ns.pool].append(sig)
        members[ns.name] = ns
        self.sig[ns.name] = sig

    def update(self, ns: NodeView) -> None:
        """Re-file a node whose free resources changed."""
        old = self.sig.get(ns.name)
        if old is None:
            return
        new = _signature(ns)
        if new == old:
            return
        groups = self.groups[ns.pool]
        members = groups[old]
        del members[ns.name]
        if not members:
            del groups[old]
        self._file(ns, new)

    def _move(self, pool: str, sig: Sig, req: Req) -> tuple[float, int, int, int] | None:
        """(score, free share of the device taken or -1, GPU left, CPU left), None if no fit."""
        key = (pool, sig, req)
        if key in self.moves:
            return self.moves[key]
        out = self._evaluate(pool, sig, req)
        self.moves[key] = out
        return out

    def _step(self, delta: float) -> float:
        """The increase of F as compared: rounded off float noise, then in whole quanta."""
        exact = round(delta, 6)
        return float(math.floor(exact / self.quantum)) if self.quantum else exact

    def _evaluate(self, pool: str, sig: Sig, req: Req) -> tuple[float, int, int, int] | None:
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
        best: tuple[float, int, int, int] | None = None
        if n == 0:
            delta = table.frag((dev, cpu - c, mem - m, hands)) - before
            return (self._step(delta), -1, free, cpu - c)
        if share == MILLI:
            whole = sum(1 for d in dev if d == MILLI)
            if whole < n:
                return None
            after = tuple(sorted(dev[: len(dev) - n] + (0,) * n))
            delta = table.frag((after, cpu - c, mem - m, hands)) - before
            left = free - gpu
            return (self._step(delta), -1, left, cpu - c)
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
            cand = (self._step(delta), d, left, cpu - c)
            if best is None or cand < best:
                best = cand
        return best

    def _ranked(self, pool: str, req: Req) -> list[Ranked]:
        """The pool's heap of states ranked for req, caught up with the states new since."""
        groups = self.groups[pool]
        born = self.born[pool]
        got = self.heaps.get((pool, req))
        if got is None:
            heap: list[Ranked] = []
            seen = [0]
            self.heaps[(pool, req)] = (heap, seen)
            fresh: Iterable[Sig] = list(groups)
        else:
            heap, seen = got
            fresh = born[seen[0] :]
        seen[0] = len(born)
        for sig in fresh:
            if sig not in groups:
                continue
            mv = self._move(pool, sig, req)
            if mv is not None:
                heapq.heappush(heap, (mv[0], mv[2], mv[3], sig, mv[1]))
        # states that no node is in any more leave from the top
        while heap and heap[0][3] not in groups:
            heapq.heappop(heap)
        return heap

    def _spread(
        self, pool: str, heap: list[Ranked], owner: str
    ) -> tuple[int, Ranked, NodeView] | None:
        """The best state with a node free of owner's replicas (or the fewest of them)."""
        groups = self.groups[pool]
        popped: list[Ranked] = []
        best: tuple[int, Ranked, NodeView] | None = None
        while heap:
            top = heapq.heappop(heap)
            members = groups.get(top[3])
            if members is None:
                continue
            popped.append(top)
            ns = min(members.values(), key=lambda n: (n.residents.get(owner, 0), n.name))
            mine = ns.residents.get(owner, 0)
            if best is None or mine < best[0]:
                best = (mine, top, ns)
            if mine == 0:
                break
        for top in popped:
            heapq.heappush(heap, top)
        return best

    def choose(
        self, req: Req, pools: Sequence[str], spread_owner: str | None = None
    ) -> Choice | None:
        """The node and devices for one task over the accepted pools; None when nothing fits.

        With spread_owner (an inference service), nodes with fewer of its replicas come first.
        """
        n, share = split_gpu(req[0])
        best: tuple[int, Ranked, NodeView] | None = None
        for pool in pools:
            if pool not in self.groups:
                continue
            heap = self._ranked(pool, req)
            if not heap:
                continue
            if spread_owner is not None:
                found = self._spread(pool, heap, spread_owner)
                if found is None:
                    continue
            else:
                top = heap[0]
                found = (0, top, min(self.groups[pool][top[3]].values(), key=_name))
            if (
                best is None
                or found[:2] < best[:2]
                or (found[:2] == best[:2] and found[2].name < best[2].name)
            ):
                best = found
        if best is None:
            return None
        ns = best[2]
        return ns.name, _devices(ns.dev, n, share, best[1][4])


def _name(ns: NodeView) -> str:
    return ns.name


def _devices(dev: Sequence[int], n: int, share: int, taken: int) -> tuple[int, ...]:
    """Device indices on the node: the first n whole ones, or the first with `taken` free."""
    if n == 0:
        return ()
    if share == MILLI:
        return tuple([i for i, d in enumerate(dev) if d == MILLI][:n])
    return (next(i for i, d in enumerate(dev) if d == taken),)
