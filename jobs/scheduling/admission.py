"""Quota checks of admission: In-Quota entitlement, max, idle borrowing, fair shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .snapshot import State
from .tree import Vec, fmt_gpu, gpus, quota_label, within
from .types import Workload

ZERO: Final = (0, 0, 0)
Shares = dict[str, float]


def may_borrow(w: Workload) -> bool:
    """Only training jobs whose idle policy allows it run on borrowed capacity."""
    return w.kind == "training" and w.idle in ("acceptable", "idle_only")


def demand(w: Workload, count: int) -> Vec:
    """Total request of count replicas."""
    r = w.request
    return (r.gpu * count, r.cpu * count, r.memory * count)


def behind(state: State, w: Workload, pool: str) -> list[int]:
    """In-Quota usage of w's chain whose place w may take without evicting it.

    Only child-level preemption takes an In-Quota place that way: a workload submitted
    directly to a parent with child_preemption ranks ahead of every workload of its children,
    so their In-Quota usage is room for it (the walk then turns the ones that no longer fit
    Not in Quota, see classify). Nobody else's: an incumbent keeps its In-Quota label, and a
    newcomer that outranks it must evict it by priority to take its place.
    """
    tree = state.tree
    q = w.quota
    if tree.quotas[q].child_preemption and tree.children[q]:
        sub = state.used(state.inq, q, pool)
        own = state.used(state.direct_inq, q, pool)
        return [sub[0] - own[0], sub[1] - own[1], sub[2] - own[2]]
    return [0, 0, 0]


def outside(state: State, w: Workload, pool: str) -> int:
    """Replicas of w running Not in Quota in the pool: the label is the whole workload's, so
    a service scaling up starts a replica In Quota only if these fit too."""
    e = state.entries.get(w.name)
    return e.pool_counts.get(pool, 0) if e is not None and not e.in_quota else 0


# why a workload cannot run In Quota: the binding quota, its free and its min GPU, and the pool
Gap = tuple[str, int, int, str]


def entitlement_gap(state: State, w: Workload, pool: str, count: int) -> Gap | None:
    """None when w fits In Quota with count more replicas in the pool; else the first gap.

    The label is the whole workload's: the replicas it runs Not in Quota in its other pools
    must fit In Quota there too, or the new ones would start In Quota only to lose the label
    (and whoever was evicted for them would have been evicted for a borrower).
    """
    if w.idle == "idle_only":
        return (w.quota, 0, 0, pool)
    gap = _pool_gap(state, w, pool, count + outside(state, w, pool))
    return gap if gap is not None else _elsewhere_gap(state, w, pool)


def _elsewhere_gap(state: State, w: Workload, pool: str) -> Gap | None:
    """For a workload running Not in Quota, the gap of its first other pool whose replicas
    would not fit In Quota there (no eviction in this pool can make it In Quota)."""
    e = state.entries.get(w.name)
    if e is None or e.in_quota:
        return None
    for other, held in e.pool_counts.items():
        if other != pool:
            gap = _pool_gap(state, w, other, held)
            if gap is not None:
                return gap
    return None


def _pool_gap(state: State, w: Workload, pool: str, count: int) -> Gap | None:
    """None when count replicas of w fit In Quota in the pool along its chain."""
    add = demand(w, count)
    tree = state.tree
    skip = behind(state, w, pool)
    for a in tree.chain[w.quota]:
        # no min in a pool admits no GPU (CPU and memory unconstrained), as in classify
        limit = tree.mins[a].get(pool, ZERO)
        used = state.used(state.inq, a, pool)
        ahead = (used[0] - skip[0], used[1] - skip[1], used[2] - skip[2])
        if not within(ahead, add, limit, True):
            return (a, max(0, limit[0] - ahead[0]), limit[0], pool)
    return None


def max_gap(state: State, w: Workload, pool: str, count: int) -> tuple[str, int] | None:
    """None when every quota of the chain stays within its max; else (quota, max GPU)."""
    add = demand(w, count)
    tree = state.tree
    for a in tree.chain[w.quota]:
        limit = tree.max_of(a, pool)
        if limit is None:
            continue
        if not within(state.used(state.usage, a, pool), add, limit, True):
            return (a, limit[0])
    return None


UNITS = ("GPUs", "millicores of CPU", "MiB of memory")


def describe_max_block(state: State, w: Workload, pool: str, count: int) -> tuple[str, bool] | None:
    """The sentence for the quota max that blocks w in a pool, with its numbers, and whether
    that max forbids the pool outright (a max of 0 GPUs); None when no max blocks it."""
    add = demand(w, count)
    tree = state.tree
    for a in tree.chain[w.quota]:
        limit = tree.max_of(a, pool)
        if limit is None:
            continue
        used = state.used(state.usage, a, pool)
        for i in range(3):
            # as within(loose=True): a zero CPU/memory max is unconstrained
            if not add[i] or (i and not limit[i]) or used[i] + add[i] <= limit[i]:
                continue
            if i == 0 and limit[0] == 0:
                return f"{quota_label(a)} may not use pool {pool}", True
            if i == 0:
                return (
                    f"{quota_label(a)} may use at most {gpus(limit[0])} in {pool}; it uses "
                    f"{fmt_gpu(used[0])} and the job needs {fmt_gpu(add[0])}",
                    False,
                )
            cap, uses, needs = str(limit[i]), str(used[i]), str(add[i])
            return (
                f"{quota_label(a)} may use at most {cap} {UNITS[i]} in {pool}; it uses {uses} "
                f"and the job needs {needs}",
                False,
            )
    return None


def reserved(state: State, quota: str, pool: str, root: str | None) -> int:
    """Unused min of lend_idle=false quotas, which nobody outside them may borrow."""
    tree = state.tree
    chain = tree.chain[quota]
    total = 0
    for name in tree.non_lending:
        if name in chain:
            continue
        if root is not None and tree.root[name] != root:
            continue
        # An outer non-lending quota already holds back this one's unused min.
        if any(not tree.quotas[a].lend_idle and a not in chain for a in tree.chain[name][1:]):
            continue
        unused = tree.min_of(name, pool)[0] - state.used(state.usage, name, pool)[0]
        total += max(0, unused)
    return total


def idle_gpu(state: State, quota: str, pool: str) -> int:
    """Milli-GPU nobody uses that a quota may borrow in this pool, within idle_scope."""
    cap = state.capacity.get(pool, ZERO)
    physical = cap[0] - state.pool_used.get(pool, [0, 0, 0])[0]
    if state.idle_scope == "pool":
        return max(0, physical - reserved(state, quota, pool, None))
    root = state.tree.root[quota]
    tree_idle = state.tree.min_of(root, pool)[0] - state.used(state.usage, root, pool)[0]
    return max(0, min(physical, tree_idle - reserved(state, quota, pool, root)))


def scope_key(state: State, quota: str) -> str:
    """Borrowers compete within their root tree, or across the pool."""
    return "*" if state.idle_scope == "pool" else state.tree.root[quota]


def waiting_demand(state: State, waiting: list[Workload]) -> dict[tuple[str, str], dict[str, int]]:
    """(scope, pool) -> quota -> milli-GPU its waiting borrowers ask for, in every pool each
    accepts (training, so all of its replicas)."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for w in waiting:
        if not may_borrow(w):
            continue
        missing = w.request.gpu * w.replicas
        for pool in pool_order(state, w):
            per = out.setdefault((scope_key(state, w.quota), pool), {})
            per[w.quota] = per.get(w.quota, 0) + missing
    return out


def water_fill(total: float, demands: dict[str, float], weights: dict[str, float]) -> Shares:
    """Weighted max-min fair shares of total, capped by each demand."""
    shares: Shares = {}
    active = {q for q, d in demands.items() if d > 0}
    for q in demands:
        shares[q] = 0.0
    left = float(total)
    while active and left > 1e-9:
        wsum = sum(weights[q] for q in active)
        level = left / wsum
        capped = [q for q in sorted(active) if demands[q] - shares[q] <= level * weights[q]]
        if not capped:
            for q in active:
                shares[q] += level * weights[q]
            break
        for q in capped:
            left -= demands[q] - shares[q]
            shares[q] = demands[q]
            active.discard(q)
    return shares


def fair_shares(
    state: State, pool: str, scope: str, extra: dict[str, int]
) -> tuple[Shares, dict[str, float]]:
    """Fair shares of borrowed GPU among a scope's borrowers; extra = pending demand."""
    tree = state.tree
    borrowed: dict[str, float] = {}
    for (q, p), g in state.borrowed.items():
        if p == pool and g > 0 and scope_key(state, q) == scope:
            borrowed[q] = float(g)
    demands = dict(borrowed)
    for q, g in extra.items():
        demands[q] = demands.get(q, 0.0) + g
    weights = {q: tree.weight_of(q, pool) for q in demands}
    total = sum(borrowed.values())
    if demands:
        total += idle_gpu(state, min(demands), pool)
    return water_fill(total, demands, weights), weights


def pool_order(state: State, w: Workload) -> Sequence[str]:
    """Accepted pools that exist and that w's quotas allow, in the order w lists them."""
    only = state.tree.allowed.get(w.quota)
    if only is None:
        return [p for p in w.pools if p in state.pools]
    return [p for p in w.pools if p in state.pools and p in only]


def describe_pool_block(state: State, w: Workload) -> str:
    """Why no pool w accepts is open to it: its quotas forbid them, or none has a node."""
    tree = state.tree
    open_pools = [p for p in w.pools if tree.allows(w.quota, p)]
    if open_pools:
        return f"no node in pool {' or '.join(open_pools)} exists"
    first = tree.forbidding(w.quota, w.pools[0])
    assert first is not None
    shut = [p for p in w.pools if tree.forbidding(w.quota, p) == first]
    only = sorted(tree.allowed.get(first, ()))
    where = f"may run only in {', '.join(only)}" if only else "may run in no node pool"
    return f"{quota_label(first)} may not use pool {' or '.join(shut)}; it {where}"


def describe_quota_block(state: State, w: Workload, pool: str, count: int, gap: Gap) -> str:
    """Why In Quota is not possible, as a sentence fragment (in the pool the gap names: one of
    w's other pools when its replicas there would not fit)."""
    quota, free, minimum, pool_at = gap
    held = outside(state, w, pool_at)
    need = demand(w, (count if pool_at == pool else 0) + held)[0]
    if w.idle == "idle_only":
        return "the job runs on idle capacity only (Only Idle Resources)"
    more = " with its replicas running Not in Quota" if held else ""
    return (
        f"{quota_label(quota)} has {fmt_gpu(free)} of {gpus(minimum)} free in pool {pool_at} "
        f"(the job needs {gpus(need)}{more})"
    )


def quota_deficit(state: State, w: Workload, pool: str, count: int, borrow: bool) -> int:
    """Milli-GPU the quota checks still miss: the cheaper of In Quota or borrowing, plus max."""
    need = demand(w, count)[0]
    held = demand(w, outside(state, w, pool))[0]  # must fit In Quota too (see outside)
    best = 1 << 62
    # In Quota, unless it never runs there or its replicas in another pool keep it out
    if w.idle != "idle_only" and _elsewhere_gap(state, w, pool) is None:
        tree = state.tree
        skip = behind(state, w, pool)[0]
        ent = 0
        for a in tree.chain[w.quota]:
            limit = tree.mins[a].get(pool, ZERO)[0]
            ahead = state.used(state.inq, a, pool)[0] - skip
            ent = max(ent, ahead + held + need - limit)
        best = ent
    if borrow and may_borrow(w):
        best = min(best, max(0, need - idle_gpu(state, w.quota, pool)))
    over = 0
    for a in state.tree.chain[w.quota]:
        cap = state.tree.max_of(a, pool)
        if cap is not None:
            over = max(over, state.used(state.usage, a, pool)[0] + need - cap[0])
    return max(0, best, over)
