"""Property-based invariants of the cycle over random clusters and workloads."""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.scheduling.classify import classify, order_key, rank, subtree_order
from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.queueing import merge_heads, priority_key
from jobs.scheduling.snapshot import Entry, State
from jobs.scheduling.tree import within
from jobs.scheduling.types import MILLI, Node, Placement, Quota, Resources, Snapshot, Workload

POOL_NAMES = ("a100", "t4", "h100", "l4")
POOLS = POOL_NAMES[:2]
GPU_CHOICES = (0, 250, 500, 600, 1000, 2000, 4000, 8000)
T = TypeVar("T")


class Draws(Protocol):
    """Where a generated cluster's choices come from: hypothesis (which shrinks a failing
    example) or a seeded random.Random (cheap: thousands of plain examples)."""

    def integers(self, lo: int, hi: int) -> int: ...
    def choice(self, options: Sequence[T]) -> T: ...
    def coin(self) -> bool: ...
    def some(self, options: Sequence[T], most: int) -> list[T]:
        """From 1 to `most` distinct options."""
        ...


class _Hypothesis:
    """Draws through hypothesis strategies."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def integers(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(options))

    def coin(self) -> bool:
        return self.draw(st.booleans())

    def some(self, options: Sequence[T], most: int) -> list[T]:
        return self.draw(st.lists(st.sampled_from(options), min_size=1, max_size=most, unique=True))


class _Random:
    """Draws from a seeded random.Random."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def integers(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence[T]) -> T:
        return self.rng.choice(options)

    def coin(self) -> bool:
        return self.rng.random() < 0.5

    def some(self, options: Sequence[T], most: int) -> list[T]:
        return self.rng.sample(list(options), self.rng.randint(1, most))


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    """A random valid tree and pending set, drawn by hypothesis (see cluster)."""
    return cluster(_Hypothesis(draw))


@dataclass(frozen=True)
class Size:
    """The bounds of a random cluster: quotas under the root (from, to), and at most so many
    nodes, workloads before the first cycle and arrivals after it; node pools, and whether
    services the first cycle started are scaled up or down before the second."""

    below: tuple[int, int] = (0, 3)
    nodes: int = 6
    first: int = 14
    later: int = 8
    pools: int = 2
    scale: bool = False


PLAIN = Size()


def random_cluster(seed: int, size: Size = PLAIN) -> Snapshot:
    """The cluster of a seed, drawn plainly at random (see cluster)."""
    return cluster(_Random(seed), size)


def cluster(d: Draws, size: Size = PLAIN) -> Snapshot:
    """A random valid tree and pending set within `size`; a first cycle starts some of
    them."""
    pools = POOL_NAMES[: size.pools]
    node_count = d.integers(1, size.nodes)
    nodes = tuple(
        Node(
            f"n{i}",
            d.choice(pools),
            d.choice((1, 2, 4, 8)),
            d.choice((8000, 32000)),
            65536,
        )
        for i in range(node_count)
    )
    caps = {p: sum(n.gpus for n in nodes if n.pool == p) * MILLI for p in pools}
    quotas: list[Quota] = []
    root_min = {p: d.integers(0, caps[p] // 1000) * 1000 for p in pools}
    quotas.append(
        Quota(
            "root",
            None,
            {p: Resources(g) for p, g in root_min.items()},
            child_preemption=d.coin(),
        )
    )
    for i in range(d.integers(*size.below)):
        parent = d.choice([q.name for q in quotas])
        pmin = next(q for q in quotas if q.name == parent).min
        kids = [q for q in quotas if q.parent == parent]
        mins = {}
        for p in pools:
            room = pmin.get(p, Resources()).gpu - sum(k.min.get(p, Resources()).gpu for k in kids)
            mins[p] = Resources(d.integers(0, max(0, room) // 1000) * 1000)
        qmax = None
        if d.coin():
            qmax = {p: Resources(mins[p].gpu + d.integers(0, 4) * 1000) for p in pools}
        quotas.append(
            Quota(
                f"q{i}",
                parent,
                mins,
                qmax,
                d.coin(),
                d.coin(),
                d.choice((None, 1.0, 3.0)),
                d.choice(("priority", "fifo")),
            )
        )
    workloads = []
    for i in range(d.integers(0, size.first)):
        kind = d.choice(("training", "training", "inference", "interactive"))
        gpu = d.choice(GPU_CHOICES)
        workloads.append(
            Workload(
                name=f"w{i}",
                quota=d.choice([q.name for q in quotas]),
                kind=kind,
                replicas=d.integers(1, 3),
                request=Resources(gpu, d.choice((0, 1000, 4000)), 1024),
                pools=tuple(d.some(pools, 2)),
                priority=d.integers(1, 9),
                idle=d.choice(("none", "acceptable", "idle_only")),
                submitted_at=float(i),
                last_checkpoint_at=None,
            )
        )
    scope = d.choice(("tree", "pool"))
    first = Snapshot(100, nodes, tuple(quotas), tuple(workloads), scope)
    result = run_cycle(first)
    placed = {a.workload: a.placements for a in result.admitted}
    # the labels the first cycle gave, as the database keeps them, or unknown (inferred)
    labelled = d.coin()
    second = []
    for w in workloads:
        if w.name in placed:
            w = replace(
                w,
                running=placed[w.name],
                started_at=100 + int(w.name[1:]),
                last_checkpoint_at=None,
                in_quota=result.classification[w.name] if labelled else None,
            )
            second.append(scaled(d, w) if size.scale and w.kind == "inference" else w)
    for i in range(d.integers(1, size.later)):
        gpu = d.choice(GPU_CHOICES)
        second.append(
            Workload(
                name=f"p{i}",
                quota=d.choice([q.name for q in quotas]),
                kind=d.choice(("training", "inference", "interactive")),
                replicas=d.integers(1, 3),
                request=Resources(gpu, 1000, 1024),
                pools=(d.choice(pools),),
                priority=d.integers(1, 9),
                idle=d.choice(("none", "acceptable", "idle_only")),
                submitted_at=200.0 + i,
            )
        )
    if d.coin():  # scaled down since: some running work drops Not in Quota
        quotas = [
            replace(q, min={p: Resources(r.gpu // 2000 * 1000) for p, r in q.min.items()})
            for q in quotas
        ]
    return Snapshot(1000, nodes, tuple(quotas), tuple(second), scope)


def scaled(d: Draws, w: Workload) -> Workload:
    """A running service as a scaling rule may leave it: as it was, asking for more replicas,
    or with some of its replicas stopped."""
    way = d.choice(("same", "up", "up", "down"))
    if way == "up":
        return replace(w, replicas=len(w.running) + d.integers(1, 3))
    if way == "down":
        keep = d.integers(1, len(w.running))
        return replace(w, running=w.running[:keep], replicas=keep + d.integers(0, 1))
    return w


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def final_running(snap: Snapshot, result: object) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
    """Placements after applying the cycle's decisions."""
    gone = {p.workload for p in result.preempted}  # type: ignore[attr-defined]
    out: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for w in snap.workloads:
        if w.running and w.name not in gone:
            out[w.name] = [(p.node, p.devices) for p in w.running]
    for a in result.admitted:  # type: ignore[attr-defined]
        out.setdefault(a.workload, []).extend((p.node, p.devices) for p in a.placements)
    return out


@FAST
@given(clusters())
def test_no_node_or_device_is_over_allocated(snap: Snapshot) -> None:
    result = run_cycle(snap)
    by_name = {w.name: w for w in snap.workloads}
    nodes = {n.name: n for n in snap.nodes}
    dev = {n: [0] * nodes[n].gpus for n in nodes}
    cpu = dict.fromkeys(nodes, 0)
    for name, pls in final_running(snap, result).items():
        req = by_name[name].request
        for node, devices in pls:
            assert nodes[node].pool in by_name[name].pools or by_name[name].running
            share = min(req.gpu, MILLI)
            assert len(devices) == (0 if req.gpu == 0 else max(1, req.gpu // MILLI))
            for d in devices:
                dev[node][d] += share
            cpu[node] += req.cpu
    for n, per in dev.items():
        assert all(x <= MILLI for x in per), (n, per)
        assert cpu[n] <= nodes[n].cpu


@FAST
@given(clusters())
def test_in_quota_usage_stays_within_min_on_every_subtree(snap: Snapshot) -> None:
    result = run_cycle(snap)
    by_name = {w.name: w for w in snap.workloads}
    pool_of = {n.name: n.pool for n in snap.nodes}
    quotas = {q.name: q for q in snap.quotas}
    used: dict[tuple[str, str], int] = {}
    running = final_running(snap, result)
    assert set(result.classification) == set(running)
    for name, pls in running.items():
        if not result.classification[name]:
            continue
        w = by_name[name]
        assert w.idle != "idle_only"
        q: str | None = w.quota
        while q is not None:
            for node, _ in pls:
                key = (q, pool_of[node])
                used[key] = used.get(key, 0) + w.request.gpu
            q = quotas[q].parent
    for (q, pool), gpu in used.items():
        assert gpu <= quotas[q].min.get(pool, Resources()).gpu, (q, pool)


@FAST
@given(clusters())
def test_every_victim_has_a_preemptor_that_was_placed(snap: Snapshot) -> None:
    result = run_cycle(snap)
    admitted = {a.workload for a in result.admitted}
    kinds = {w.name: w.kind for w in snap.workloads}
    for p in result.preempted:
        assert p.by in admitted
        assert kinds[p.workload] == "training"
        assert p.reason in ("reclaim", "child_preemption", "priority", "fair_share", "min")
    # a training victim still waiting is pending again, with its reason; one started again is
    # not (a service may be both: some replicas start, the others wait)
    pending = {p.workload for p in result.pending if kinds[p.workload] == "training"}
    running = {w.name for w in snap.workloads if w.running}
    assert not (pending & admitted)
    assert pending & running <= {p.workload for p in result.preempted}


@st.composite
def restricted_clusters(draw: st.DrawFn) -> Snapshot:
    """A random cluster whose quotas were then restricted to some node pools each (running
    work stays where it is, in a pool its quota may since have lost)."""
    snap = draw(clusters())
    quotas = tuple(
        replace(q, pools=tuple(draw(st.lists(st.sampled_from(POOLS), max_size=2, unique=True))))
        for q in snap.quotas
    )
    return replace(snap, quotas=quotas)


def allows(snap: Snapshot, quota: str, pool: str) -> bool:
    """The quota and every ancestor let its workloads run in the pool (empty: any pool)."""
    quotas = {q.name: q for q in snap.quotas}
    q: str | None = quota
    while q is not None:
        if quotas[q].pools and pool not in quotas[q].pools:
            return False
        q = quotas[q].parent
    return True


@FAST
@given(restricted_clusters())
def test_nothing_starts_or_turns_in_quota_outside_its_quotas_pools(snap: Snapshot) -> None:
    result = run_cycle(snap)
    by_name = {w.name: w for w in snap.workloads}
    pool_of = {n.name: n.pool for n in snap.nodes}
    for a in result.admitted:
        for p in a.placements:
            assert allows(snap, by_name[a.workload].quota, pool_of[p.node]), (a, p)
    for name, in_quota in result.classification.items():
        w = by_name[name]
        outside = any(not allows(snap, w.quota, pool_of[p.node]) for p in w.running)
        if outside and w.in_quota is False:
            assert not in_quota, w
    for p in result.pending:
        w = by_name[p.workload]
        if not any(allows(snap, w.quota, pool) for pool in w.pools):
            assert " may not use pool " in p.reason, p


@st.composite
def crowded_quotas(draw: st.DrawFn) -> Snapshot:
    """One small pool shared by a quota and its child, both nearly full: services running
    some of their replicas (In Quota or, after a scale-down, not), and services and jobs
    of every idle policy waiting, at random priorities."""
    nodes = tuple(Node(f"n{i}", "a100", 4, 32000, 65536) for i in range(draw(st.integers(1, 3))))
    total = 4 * len(nodes)
    top = draw(st.integers(1, total))
    quotas = (
        Quota("q", None, {"a100": Resources(top * MILLI)}, child_preemption=draw(st.booleans())),
        Quota("c", "q", {"a100": Resources(draw(st.integers(0, top)) * MILLI)}),
    )
    workloads: list[Workload] = []
    free = [n.name for n in nodes for _ in range(4)]
    for i in range(draw(st.integers(0, 4))):
        running = draw(st.integers(1, 3))
        on = [free.pop() for _ in range(min(running, len(free)))]
        if not on:
            break
        workloads.append(
            Workload(
                f"s{i}",
                draw(st.sampled_from(("q", "c"))),
                "inference",
                running + draw(st.integers(0, 2)),
                Resources(MILLI, 1000, 1024),
                ("a100",),
                priority=draw(st.integers(1, 9)),
                running=tuple(Placement(n) for n in on),
                submitted_at=float(i),
                started_at=float(i),
            )
        )
    for i in range(draw(st.integers(1, 4))):
        workloads.append(
            Workload(
                f"p{i}",
                draw(st.sampled_from(("q", "c"))),
                draw(st.sampled_from(("training", "inference", "interactive"))),
                draw(st.integers(1, 2)),
                Resources(draw(st.sampled_from((500, 1000, 2000))), 1000, 1024),
                ("a100",),
                priority=draw(st.integers(1, 9)),
                idle=draw(st.sampled_from(("none", "acceptable", "idle_only"))),
                submitted_at=100.0 + i,
            )
        )
    return Snapshot(1000, nodes, quotas, tuple(workloads))


@FAST
@given(crowded_quotas())
def test_what_may_not_borrow_starts_only_in_quota(snap: Snapshot) -> None:
    """Services, notebooks and idle-none jobs never start a replica borrowed."""
    result = run_cycle(snap)
    by_name = {w.name: w for w in snap.workloads}
    for a in result.admitted:
        w = by_name[a.workload]
        if w.kind != "training" or w.idle == "none":
            assert a.in_quota, (w, a)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_the_cycle_is_deterministic(snap: Snapshot) -> None:
    assert run_cycle(snap) == run_cycle(snap)
    shuffled = replace(snap, workloads=tuple(reversed(snap.workloads)))
    a, b = run_cycle(snap), run_cycle(shuffled)
    assert sorted(a.admitted, key=str) == sorted(b.admitted, key=str)
    assert dict(a.classification) == dict(b.classification)


@st.composite
def running_sets(draw: st.DrawFn) -> Snapshot:
    """A random tree (CPU mins too) over a running set placed first-fit, some of it on two
    pools at once, so any quota of the tree may bind."""
    nodes = [Node(f"{p}-{i}", p, 4, 16000, 65536) for p in POOLS for i in range(3)]
    quotas: list[Quota] = []
    for i in range(draw(st.integers(1, 6))):
        parent = draw(st.sampled_from([None, *(q.name for q in quotas)]))
        if parent is None:
            room = {p: (12000, 48000) for p in POOLS}
        else:
            pmin = next(q for q in quotas if q.name == parent).min
            kids = [q for q in quotas if q.parent == parent]
            room = {
                p: (
                    pmin[p].gpu - sum(k.min[p].gpu for k in kids),
                    pmin[p].cpu - sum(k.min[p].cpu for k in kids),
                )
                for p in POOLS
            }
        mins = {
            p: Resources(
                draw(st.integers(0, max(0, g) // 500)) * 500,
                draw(st.sampled_from((0, c // 4, c))) if c > 0 else 0,
            )
            for p, (g, c) in room.items()
        }
        quotas.append(Quota(f"q{i}", parent, mins, child_preemption=draw(st.booleans())))
    free = {n.name: [4, n.cpu] for n in nodes}
    workloads = []
    labelled = draw(st.booleans())
    for i in range(draw(st.integers(0, 24))):
        gpus = draw(st.sampled_from((0, 1, 2)))
        pools = tuple(draw(st.lists(st.sampled_from(POOLS), min_size=1, max_size=2, unique=True)))
        cpu = draw(st.sampled_from((0, 2000, 6000)))
        running = []
        for pool in pools:
            spot = next(
                (
                    n
                    for n in nodes
                    if n.pool == pool and free[n.name][0] >= gpus and free[n.name][1] >= cpu
                ),
                None,
            )
            if spot is not None:
                free[spot.name][0] -= gpus
                free[spot.name][1] -= cpu
                running.append(Placement(spot.name))
        if not running:
            continue
        workloads.append(
            Workload(
                f"w{i}",
                draw(st.sampled_from([q.name for q in quotas])),
                draw(st.sampled_from(("training", "training", "inference"))),
                len(running),
                Resources(gpus * MILLI, cpu, 1024),
                pools,
                priority=draw(st.integers(1, 9)),
                idle=draw(st.sampled_from(("none", "acceptable", "idle_only"))),
                running=tuple(running),
                submitted_at=float(i),
                started_at=float(draw(st.integers(0, 5))),
                # the label the state holds, when known (any, as after a smaller min)
                in_quota=draw(st.sampled_from((None, None, True, False))) if labelled else None,
            )
        )
    return Snapshot(100, tuple(nodes), tuple(quotas), tuple(workloads))


def reference_labels(snap: Snapshot) -> dict[str, bool]:
    """DESIGN §1's central rule read literally, every quota of the chain checked in every pool:
    1. a running workload keeps the label it has (idle_only is Not in Quota);
    2. the unknown ones are labelled in start order, oldest first, In Quota when they fit;
    3. under each topmost quota holding more In Quota than its min, the walk in DESIGN's
       order keeps In Quota what fits and turns the rest Not in Quota;
    4. then each Not-in-Quota one (but idle_only) whose chain has room turns In Quota, in
       DESIGN's order."""
    state = State(snap)
    tree = state.tree
    entries = sorted(state.entries.values(), key=lambda e: e.w.name)
    zero = (0, 0, 0)

    def adds(e: Entry) -> dict[str, list[int]]:
        return {p: [x * n for x in e.req] for p, n in e.pool_counts.items()}

    def fits(used: dict[tuple[str, str], list[int]], e: Entry, quotas: list[str]) -> bool:
        return all(
            within(used.get((a, p), [0, 0, 0]), add, tree.mins[a].get(p, zero), True)
            for p, add in adds(e).items()
            for a in quotas
        )

    def count(used: dict[tuple[str, str], list[int]], e: Entry, quotas: list[str]) -> None:
        for p, add in adds(e).items():
            for a in quotas:
                u = used.setdefault((a, p), [0, 0, 0])
                for i in range(3):
                    u[i] += add[i]

    def in_design_order(chosen: list[Entry], top: str) -> list[Entry]:
        direct: dict[str, list[Entry]] = {}
        for e in chosen:
            e.okey = rank(e, snap.now)
            direct.setdefault(e.w.quota, []).append(e)
        for lst in direct.values():
            lst.sort(key=order_key)
        return list(subtree_order(tree, top, direct))

    labels: dict[str, bool] = {}
    used: dict[tuple[str, str], list[int]] = {}
    for e in entries:
        if e.w.idle == "idle_only" or e.w.in_quota is not None:
            labels[e.w.name] = e.w.idle != "idle_only" and bool(e.w.in_quota)
            if labels[e.w.name]:
                count(used, e, list(tree.chain[e.w.quota]))
    unknown = [e for e in entries if e.w.name not in labels]
    for e in sorted(unknown, key=lambda e: (e.w.started_at, e.w.submitted_at, e.w.name)):
        labels[e.w.name] = fits(used, e, list(tree.chain[e.w.quota]))
        if labels[e.w.name]:
            count(used, e, list(tree.chain[e.w.quota]))
    over = {
        a for (a, p), u in used.items() if not within([0, 0, 0], u, tree.mins[a].get(p, zero), True)
    }
    for top in sorted(q for q in over if not set(tree.chain[q][1:]) & over):
        inside = {top, *tree.descendants[top]}
        walked = [e for e in entries if e.w.quota in inside and labels[e.w.name]]
        rows: dict[tuple[str, str], list[int]] = {}
        for e in in_design_order(walked, top):
            chain = [a for a in tree.chain[e.w.quota] if a in inside]
            labels[e.w.name] = fits(rows, e, chain)
            if labels[e.w.name]:
                count(rows, e, chain)
    used = {}
    for e in entries:
        if labels[e.w.name]:
            count(used, e, list(tree.chain[e.w.quota]))
    for root in tree.roots():
        inside = {root, *tree.descendants[root]}
        out = [
            e
            for e in entries
            if e.w.quota in inside and not labels[e.w.name] and e.w.idle != "idle_only"
        ]
        for e in in_design_order(out, root):
            if fits(used, e, list(tree.chain[e.w.quota])):
                labels[e.w.name] = True
                count(used, e, list(tree.chain[e.w.quota]))
    return labels


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(running_sets())
def test_classification_follows_the_central_rule(snap: Snapshot) -> None:
    assert classify(snap) == reference_labels(snap)


@st.composite
def queues(draw: st.DrawFn) -> list[list[Workload]]:
    """Queues of uniquely named workloads, each sorted by priority or in arbitrary (FIFO) order."""
    names = iter(range(10**6))
    out = []
    for _ in range(draw(st.integers(0, 5))):
        q = [
            Workload(
                f"w{next(names)}",
                "q",
                "training",
                1,
                Resources(MILLI),
                ("a100",),
                priority=draw(st.integers(1, 3)),
                submitted_at=float(draw(st.integers(0, 4))),
            )
            for _ in range(draw(st.integers(0, 6)))
        ]
        if draw(st.booleans()):
            q.sort(key=priority_key)
        out.append(q)
    return out


@given(queues())
def test_queue_heads_merge_as_heapq_merges_them(streams: list[list[Workload]]) -> None:
    assert merge_heads(streams) == list(heapq.merge(*streams, key=priority_key))
