"""Placement of replicas on nodes: fragmentation-aware (the default) or best fit, with GPU sharing
per device and inference replicas spread over nodes.

The snapshot's `placement` picks the policy for the whole cycle: "fgd" asks the state's
FragmentationScorer (jobs.scheduling.fragmentation) for the node where the expected
fragmentation under the target workload grows least; "bestfit" walks the buckets below for the
tightest fit. Every placement of the cycle (admission, trial placements, preemption) goes
through find_node.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from .snapshot import LEVEL, LEVELS, NodeState, PoolIndex, State
from .tree import Vec, fmt_gpu, gpus
from .types import MILLI, Resources, Workload

SCAN_LIMIT = 64  # nodes inspected per bucket when ranking; buckets are already close fits

Choice = tuple[str, tuple[int, ...]]


def devices_on(dev: Sequence[int], gpu: int) -> tuple[int, ...] | None:
    """Devices for one replica on a node: best-fit partial device, or whole free devices."""
    if gpu == 0:
        return ()
    if gpu < MILLI:
        best = -1
        best_free = MILLI + 1
        for i, d in enumerate(dev):
            if gpu <= d < best_free:
                best, best_free = i, d
        return None if best < 0 else (best,)
    need = gpu // MILLI
    picked = [i for i, d in enumerate(dev) if d == MILLI]
    return tuple(picked[:need]) if len(picked) >= need else None


def hands_out(ns: NodeState, gpu: int) -> bool:
    """The node's device plugin gives this kind of GPU request: a fraction only where GPUs
    are shared, whole GPUs only where they are not (a time-slice replica is not a GPU)."""
    if 0 < gpu < MILLI:
        return ns.shares
    return ns.whole or gpu == 0


def fits(ns: NodeState, req: Vec) -> tuple[int, ...] | None:
    """Devices for one replica on this node right now, or None."""
    if req[1] > ns.cpu or req[2] > ns.mem or not ns.schedulable or not hands_out(ns, req[0]):
        return None
    if req[0] >= MILLI and ns.full < req[0] // MILLI:
        return None
    return devices_on(ns.dev, req[0])


@cache
def block(need: int, free: int) -> int:
    """The smallest power-of-two block of `free` whole devices that holds `need` (0: exact).

    A node's free devices are seen as power-of-two blocks, as a buddy allocator does (7 free
    = 4 + 2 + 1). Taking a replica from the smallest block that holds it leaves the 4- and
    8-device blocks that bigger jobs need whole: plain best fit would put one GPU on a node
    with 4 free rather than on one with 7 free, leaving 3 + 7 where 4 + 6 could be had.
    """
    if free == need:
        return 0
    bit = 1
    while bit <= free:
        if free & bit and bit >= need:
            return bit
        bit <<= 1
    return bit  # no block holds it: rank with the next power of two above free


@cache
def bucket_order(need: int, top: int) -> tuple[int, ...]:
    """Counts of whole free devices (need..top) in the order packing tries them: the
    smallest block first, then the fewest free devices (best fit)."""
    return tuple(sorted(range(need, top + 1), key=lambda k: (block(need, k), k)))


def _pack_score(ns: NodeState, req: Vec, devices: tuple[int, ...]) -> tuple[int, int, int, str]:
    """Lower is tighter: leftover on the chosen device, block then whole devices, CPU left."""
    if 0 < req[0] < MILLI:
        return (ns.dev[devices[0]] - req[0], ns.full, ns.cpu - req[1], ns.name)
    # the block, then the whole free devices: node sizes are far below 2**16
    return (0, (block(len(devices), ns.full) << 16) + ns.full, ns.cpu - req[1], ns.name)


def find_node(
    state: State, req: Vec, pools: Sequence[str], spread: bool, owner: str | None = None
) -> Choice | None:
    """Best node for one replica over the accepted pools; None when nothing fits."""
    if state.placement == "fgd":
        if not any(_gpu_room(state.pools.get(pool), req[0]) for pool in pools):
            return None  # most failed placements of a busy cluster end here, before scoring
        return state.scorer().choose(req, pools, owner if spread else None)
    best: tuple[NodeState, tuple[int, ...]] | None = None
    best_key: tuple[int, int, int, str] | None = None
    for pool in pools:
        index = state.pools.get(pool)
        if index is None:
            continue
        found = _find_in_pool(index.by_full, index.by_level, req, spread, owner)
        if found is None:
            continue
        if best is None:
            best = found  # ranked against other pools only when another one has a fit
            continue
        if best_key is None:
            best_key = _pool_key(best, req, spread, owner)
        key = _pool_key(found, req, spread, owner)
        if key < best_key:
            best, best_key = found, key
    return None if best is None else (best[0].name, best[1])


def _gpu_room(index: PoolIndex | None, gpu: int) -> bool:
    """Whether some node of the pool has the free GPU for one replica (CPU and memory aside)."""
    if index is None:
        return False
    if gpu == 0:
        return True
    for k in range(-(-gpu // MILLI), len(index.by_full)):
        if index.by_full[k]:
            return True
    if gpu < MILLI:
        for lv in range(gpu // LEVEL, LEVELS):
            if index.by_level[lv]:
                return True
    return False


def _pool_key(
    found: tuple[NodeState, tuple[int, ...]], req: Vec, spread: bool, owner: str | None
) -> tuple[int, int, int, str]:
    """How the best nodes of two pools compare."""
    ns, devices = found
    return _spread_key(ns, owner) if spread else _pack_score(ns, req, devices)


def _spread_key(ns: NodeState, owner: str | None) -> tuple[int, int, int, str]:
    """Lower is emptier: fewer replicas of the same workload, more whole devices free."""
    mine = ns.residents.get(owner, 0) if owner else 0
    return (mine, -ns.full, -ns.cpu, ns.name)


def _find_in_pool(
    by_full: list[dict[str, NodeState]],
    by_level: list[dict[str, NodeState]],
    req: Vec,
    spread: bool,
    owner: str | None,
) -> tuple[NodeState, tuple[int, ...]] | None:
    """Walk the buckets from the tightest (packing) or the emptiest (spreading) outwards."""
    gpu = req[0]
    need = -(-gpu // MILLI) if gpu >= MILLI else 0
    if spread:
        fallback: tuple[NodeState, tuple[int, ...]] | None = None
        for k in range(len(by_full) - 1, max(need, 1 if gpu > 0 else 0) - 1, -1):
            for ns in by_full[k].values():
                dv = fits(ns, req)
                if dv is None:
                    continue
                if owner is None or owner not in ns.residents:
                    return ns, dv
                if fallback is None:
                    fallback = (ns, dv)
        if fallback is not None:
            return fallback
        if 0 < gpu < MILLI:
            return _best_partial(by_level, req)
        return None
    if 0 < gpu < MILLI:
        found = _best_partial(by_level, req)
        if found is not None:
            return found
        need = 1
    return _tightest(by_full, req, need)


def _tightest(
    by_full: list[dict[str, NodeState]], req: Vec, need: int
) -> tuple[NodeState, tuple[int, ...]] | None:
    """The first bucket in packing order with a fit, and its node with the least CPU left
    (then the first name) among the first SCAN_LIMIT that fit."""
    gpu, rc, rm = req
    # a node of bucket k has k whole free devices, k >= need: only a shared request's
    # devices depend on more than CPU and memory, so whole ones are picked for the winner
    shared = 0 < gpu < MILLI
    for k in bucket_order(need, len(by_full) - 1):
        bucket = by_full[k]
        if not bucket:
            continue
        best: NodeState | None = None
        best_cpu = 0
        best_dv: tuple[int, ...] | None = None
        scanned = 0
        for ns in bucket.values():
            cpu = ns.cpu
            if cpu < rc or ns.mem < rm or not ns.schedulable or not hands_out(ns, gpu):
                continue
            dv = None
            if shared:
                dv = devices_on(ns.dev, gpu)
                if dv is None:
                    continue
            if best is None or cpu < best_cpu or (cpu == best_cpu and ns.name < best.name):
                best, best_cpu, best_dv = ns, cpu, dv
            scanned += 1
            if scanned >= SCAN_LIMIT:
                break
        if best is not None:
            if best_dv is None:
                best_dv = devices_on(best.dev, gpu)
            if best_dv is not None:
                return best, best_dv
    return None


def _best_partial(
    by_level: list[dict[str, NodeState]], req: Vec
) -> tuple[NodeState, tuple[int, ...]] | None:
    """A partially used device with the least free milli-GPU that still holds the request."""
    gpu, rc, rm = req
    for lv in range(gpu // LEVEL, LEVELS):
        bucket = by_level[lv]
        if not bucket:
            continue  # most levels are empty: skip them before any setup
        # a node's candidate is its first device in [lo, hi): this level, holding gpu
        base = lv * LEVEL
        hi = base + LEVEL
        # every node of the bucket has a device in the level, so when all of the level holds
        # gpu each node fits, and its device matters only if it can beat the best so far
        whole = gpu <= base
        lo = base if whole else gpu
        best: NodeState | None = None
        best_i = 0
        best_d = hi
        scanned = 0
        for ns in bucket.values():
            if rc > ns.cpu or rm > ns.mem or not ns.schedulable or not ns.shares:
                continue
            if not whole or best_d > lo or best is None or ns.name < best.name:
                i = 0
                for d in ns.dev:
                    if lo <= d < hi:
                        break
                    i += 1
                else:
                    continue
                if best is None or d < best_d or (d == best_d and ns.name < best.name):
                    best, best_i, best_d = ns, i, d
            scanned += 1
            if scanned >= SCAN_LIMIT:
                break
        if best is not None:
            return best, (best_i,)
    return None


def place_replicas(
    state: State, w: Workload, count: int, in_quota: bool, pools: Sequence[str]
) -> list[Choice] | None:
    """Place count new replicas of w in the pools, all or none; the state keeps them."""
    keep, placed = place_up_to(state, w, count, in_quota, pools)
    if len(placed) < count:
        state.drop_new_replicas(w, keep)
        return None
    return placed


def place_up_to(
    state: State, w: Workload, count: int, in_quota: bool, pools: Sequence[str]
) -> tuple[int, list[Choice]]:
    """Place new replicas of w one by one until count are placed or the next does not fit:
    the replicas w had before, and the new ones (which the state keeps)."""
    spread = w.kind == "inference"
    e = state.entries.get(w.name)
    keep = len(e.placements) if e is not None else 0
    req = (w.request.gpu, w.request.cpu, w.request.memory)
    placed: list[Choice] = []
    for _ in range(count):
        choice = find_node(state, req, pools, spread, w.name)
        if choice is None:
            break
        state.add_replica(w, choice[0], choice[1], in_quota)
        placed.append(choice)
    return keep, placed


def explain_no_fit(state: State, w: Workload) -> str:
    """A sentence saying why no node of the accepted pools its quotas allow takes one
    replica."""
    req = w.request
    open_pools = [p for p in w.pools if state.tree.allows(w.quota, p)]
    pools = " or ".join(open_pools)
    known = [state.pools[p] for p in open_pools if p in state.pools]
    if not known:
        return f"no node in pool {pools} exists"
    if req.gpu and not any(hands_out(ns, req.gpu) for ix in known for ns in ix.nodes.values()):
        if req.gpu < MILLI:
            return f"no node in pool {pools} shares its GPUs, as a fraction of a GPU needs"
        return f"the nodes of pool {pools} hand out shares of GPUs (time-slicing), not whole GPUs"
    rest = _cores_and_memory(req)
    if req.gpu >= MILLI:
        what = f"{fmt_gpu(req.gpu)} free GPU{'' if req.gpu == MILLI else 's'}"
        buckets = [b for ix in known for b in ix.by_full[req.gpu // MILLI :]]
    elif req.gpu > 0:
        what = f"a GPU with {fmt_gpu(req.gpu)} free"
        buckets = [b for ix in known for b in (*ix.by_full[1:], *ix.by_level[req.gpu // LEVEL :])]
    else:
        return f"no node in pool {pools} has {rest or 'room for it'}"
    gpu_ok = any(hands_out(ns, req.gpu) for b in buckets for ns in b.values())
    if not gpu_ok and any(buckets):
        # the room is on nodes whose device plugin hands out the other kind of GPU
        kind = "whole GPUs" if req.gpu >= MILLI else "shares of a GPU"
        return f"the nodes of pool {pools} with {what} do not hand out {kind}"
    if gpu_ok and rest:
        return f"no node in pool {pools} has {what} together with {rest}"
    return f"no node in pool {pools} has {what}"


def explain_gang_short(w: Workload, fit: int, count: int, pool: str) -> str:
    """A sentence for a gang of which only `fit` of `count` new replicas fit in the pool that
    takes the most of it."""
    each = _listed(_request_words(w.request, gpu=True))
    return (
        f"the free room of pool {pool} takes only {fit} of the {count} replicas ({each} each), "
        "and they start together or not at all"
    )


def _request_words(req: Resources, gpu: bool, free: str = "") -> list[str]:
    """A request's amounts in words ("4 GPUs", "8000 millicores", "64 MiB of memory"), the
    GPUs only when asked for and the cores called `free` ones when so told."""
    parts = [gpus(req.gpu)] if gpu and req.gpu else []
    if req.cpu:
        parts.append(f"{req.cpu} {free}millicores")
    if req.memory:
        parts.append(f"{req.memory} MiB of memory")
    return parts


def _listed(parts: list[str]) -> str:
    """Words as a list in a sentence: "a", "a and b", "a, b and c"."""
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 2 else parts)


def _cores_and_memory(req: Resources) -> str:
    """The CPU and memory a request asks for, as free room on one node ("" for none)."""
    return _listed(_request_words(req, gpu=False, free="free "))
