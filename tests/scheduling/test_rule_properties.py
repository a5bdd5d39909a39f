"""DESIGN §1's promises over random histories: several cycles of a random tree, with arrivals,
finishes and scaled mins between them, each cycle fed the labels the last one gave."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import MILLI, CycleResult, Node, Quota, Resources, Snapshot, Workload

from .test_stability import next_snapshot

POOLS = ("a100", "t4")
GPUS = (0, 500, 1000, 2000, 4000, 8000)
HISTORY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Step:
    """One cycle of a history: its snapshot, its result, and what changed just before it."""

    snap: Snapshot
    result: CycleResult
    shrunk: set[str] = field(default_factory=set)  # quotas whose min shrank before it


@st.composite
def pending_workload(draw: st.DrawFn, name: str, quotas: list[str], at: float) -> Workload:
    """A workload of any kind and idle policy, waiting since `at`."""
    kind = draw(st.sampled_from(("training", "training", "training", "inference", "interactive")))
    return Workload(
        name=name,
        quota=draw(st.sampled_from(quotas)),
        kind=kind,
        replicas=draw(st.integers(1, 2)),
        request=Resources(draw(st.sampled_from(GPUS)), draw(st.sampled_from((0, 1000))), 1024),
        pools=(draw(st.sampled_from(POOLS)),),
        priority=draw(st.integers(1, 9)),
        idle=draw(st.sampled_from(("none", "acceptable", "idle_only"))),
        submitted_at=at,
    )


def rescale(quotas: list[Quota], name: str, pool: str, gpu: int) -> list[Quota]:
    """The tree with one quota's GPU min in a pool set to gpu."""
    out = []
    for q in quotas:
        if q.name == name:
            mins = dict(q.min)
            mins[pool] = Resources(gpu, mins.get(pool, Resources()).cpu)
            q = replace(q, min=mins)
        out.append(q)
    return out


def gpu_min(quotas: list[Quota], name: str, pool: str) -> int:
    return next(q for q in quotas if q.name == name).min.get(pool, Resources()).gpu


@st.composite
def histories(draw: st.DrawFn) -> list[Step]:
    """A random tree run for 2 to 4 cycles, changing between cycles."""
    nodes = tuple(
        Node(f"n{i}", draw(st.sampled_from(POOLS)), draw(st.sampled_from((2, 4, 8))), 16000, 65536)
        for i in range(draw(st.integers(1, 5)))
    )
    caps = {p: sum(n.gpus for n in nodes if n.pool == p) * MILLI for p in POOLS}
    quotas = [
        Quota(
            "root",
            None,
            {p: Resources(draw(st.integers(0, caps[p] // MILLI)) * MILLI) for p in POOLS},
            child_preemption=draw(st.booleans()),
        )
    ]
    for i in range(draw(st.integers(1, 4))):
        parent = draw(st.sampled_from([q.name for q in quotas]))
        mins = {}
        for p in POOLS:
            kids = sum(gpu_min(quotas, q.name, p) for q in quotas if q.parent == parent)
            room = gpu_min(quotas, parent, p) - kids
            mins[p] = Resources(draw(st.integers(0, max(0, room) // MILLI)) * MILLI)
        qmax = None
        if draw(st.booleans()):
            qmax = {p: Resources(mins[p].gpu + draw(st.integers(0, 8)) * MILLI) for p in POOLS}
        quotas.append(
            Quota(
                f"q{i}",
                parent,
                mins,
                qmax,
                child_preemption=draw(st.booleans()),
                lend_idle=draw(st.booleans()),
            )
        )
    names = [q.name for q in quotas]
    count = iter(range(10**6))
    workloads = tuple(
        draw(pending_workload(f"w{next(count)}", names, float(i)))
        for i in range(draw(st.integers(1, 10)))
    )
    snap = Snapshot(100, nodes, tuple(quotas), workloads, draw(st.sampled_from(("tree", "pool"))))
    steps = [Step(snap, run_cycle(snap))]
    for _ in range(draw(st.integers(1, 3))):
        snap = next_snapshot(snap, steps[-1].result)
        now = snap.now + 100
        running = sorted(w.name for w in snap.workloads if w.running)
        gone = set(draw(st.lists(st.sampled_from(running), unique=True))) if running else set()
        kept = [w for w in snap.workloads if w.name not in gone]
        kept += [
            draw(pending_workload(f"w{next(count)}", names, now + i))
            for i in range(draw(st.integers(0, 4)))
        ]
        quotas = list(snap.quotas)
        shrunk: set[str] = set()
        for _ in range(draw(st.integers(0, 2))):  # scale a min: down to its children's sum,
            name = draw(st.sampled_from(names))  # up to what its parent has left
            pool = draw(st.sampled_from(POOLS))
            q = next(x for x in quotas if x.name == name)
            low = sum(gpu_min(quotas, k.name, pool) for k in quotas if k.parent == name)
            if q.parent is None:
                high = caps[pool]
            else:
                siblings = [k for k in quotas if k.parent == q.parent and k.name != name]
                sib = sum(gpu_min(quotas, k.name, pool) for k in siblings)
                high = gpu_min(quotas, q.parent, pool) - sib
            old = gpu_min(quotas, name, pool)
            new = draw(st.integers(low // MILLI, max(low, high) // MILLI)) * MILLI
            if new < old:
                shrunk.add(name)
            quotas = rescale(quotas, name, pool, new)
        snap = replace(snap, now=now, quotas=tuple(quotas), workloads=tuple(kept))
        steps.append(Step(snap, run_cycle(snap), shrunk))
    return steps


def chain(snap: Snapshot, quota: str) -> list[str]:
    parents = {q.name: q.parent for q in snap.quotas}
    out: list[str] = []
    cur: str | None = quota
    while cur is not None:
        out.append(cur)
        cur = parents[cur]
    return out


def labels_before(snap: Snapshot) -> dict[str, bool | None]:
    return {w.name: w.in_quota for w in snap.workloads if w.running}


def shrink_since(steps: list[Step], upto: int, quotas: list[str], since: int) -> bool:
    """Whether a min of one of these quotas shrank before a cycle in since..upto."""
    return any(set(quotas) & steps[i].shrunk for i in range(since, upto + 1))


def admitted_at(steps: list[Step], upto: int, name: str) -> int:
    """The last cycle up to `upto` that started the workload (0 when none did)."""
    started = [i for i in range(upto + 1) if name in {a.workload for a in steps[i].result.admitted}]
    return started[-1] if started else 0


@HISTORY
@given(histories())
def test_idle_none_is_never_reclaimed_unless_a_min_shrank_under_it(steps: list[Step]) -> None:
    for i, step in enumerate(steps):
        by_name = {w.name: w for w in step.snap.workloads}
        for p in step.result.preempted:
            v = by_name[p.workload]
            if v.idle != "none":
                continue
            assert p.reason not in ("reclaim", "fair_share"), p
            if p.reason == "min":
                since = admitted_at(steps, i, v.name)
                assert shrink_since(steps, i, chain(step.snap, v.quota), since + 1), p


@HISTORY
@given(histories())
def test_in_quota_holds_until_a_smaller_min_or_a_named_preemption(steps: list[Step]) -> None:
    for step in steps:
        snap, result = step.snap, step.result
        by_name = {w.name: w for w in snap.workloads}
        before = labels_before(snap)
        fresh = {a.workload for a in result.admitted}
        demoted = {d.workload: d for d in result.demoted}
        for name, label in before.items():
            if label is not True:
                continue
            if name in result.classification and name not in fresh:
                if result.classification[name]:
                    continue
                # it lost the label: named, for a smaller min of its chain or by its parent
                assert name in demoted, (name, result)
                d = demoted[name]
                if d.reason == "min":
                    assert set(chain(snap, by_name[name].quota)) & step.shrunk, d
                else:
                    assert d.reason == "child_preemption", d
                    parent = by_name[d.by].quota
                    assert d.by in fresh and parent in chain(snap, by_name[name].quota)[1:]
                    assert next(q for q in snap.quotas if q.name == parent).child_preemption
        for p in result.preempted:
            if before.get(p.workload) is True and p.workload not in demoted:
                # an In-Quota victim: by priority in its quota, by its parent, or after a
                # smaller min that left it out (then demoted first, named)
                assert p.reason in ("priority", "child_preemption", "min"), p
                if p.reason == "min":
                    assert set(chain(snap, by_name[p.workload].quota)) & step.shrunk, p
        for d in result.demoted:
            assert before.get(d.workload) is True or d.workload in fresh, d


@HISTORY
@given(histories())
def test_every_reclaim_victim_ran_on_borrowed_capacity(steps: list[Step]) -> None:
    for step in steps:
        by_name = {w.name: w for w in step.snap.workloads}
        before = labels_before(step.snap)
        for p in step.result.preempted:
            if p.reason != "reclaim":
                continue
            v = by_name[p.workload]
            # Not in Quota as the cycle found it, a borrower, and not pushed out in the cycle
            assert before.get(p.workload) is not True, p
            assert v.kind == "training" and v.idle in ("acceptable", "idle_only"), p
            assert p.quota == by_name[p.by].quota


IDLE = re.compile(r"only ([\d.]+) idle GPUs? can be borrowed there \(it needs ([\d.]+) GPUs?\)")
MAX = re.compile(
    r"(\S+(?: \S+)?) may use at most ([\d.]+) GPUs? in (\S+); "
    r"it uses ([\d.]+) and the job needs ([\d.]+)"
)
FREE = re.compile(
    r"(\S+(?: \S+)?) has ([\d.]+) of ([\d.]+) GPUs? free in pool (\S+) "
    r"\(the job needs ([\d.]+) GPUs?"
)
GANG = re.compile(r"the free room of pool a100 takes only (\d+) of the (\d+) replicas")


def milli(text: str) -> int:
    return round(float(text) * MILLI)


def quota_named(snap: Snapshot, label: str) -> Quota:
    return next(q for q in snap.quotas if label in (q.name, f"Quota {q.name}"))


@HISTORY
@given(histories())
def test_every_pending_sentence_tells_the_numbers_of_the_quotas(steps: list[Step]) -> None:
    for step in steps:
        for p in step.result.pending:
            for got, need in IDLE.findall(p.reason):
                assert milli(got) < milli(need), p
            for label, cap, pool, uses, need in MAX.findall(p.reason):
                q = quota_named(step.snap, label)
                assert q.max is not None and q.max[pool].gpu == milli(cap), p
                assert milli(uses) + milli(need) > milli(cap), p
            for label, free, total, pool, need in FREE.findall(p.reason):
                q = quota_named(step.snap, label)
                assert q.min.get(pool, Resources()).gpu == milli(total), p
                assert milli(free) < milli(need) and milli(free) <= milli(total), p


@st.composite
def borrowing_queues(draw: st.DrawFn) -> Snapshot:
    """One tree: B (min 0..8, maybe a max) borrows from an idle lender L; B's queue holds
    idle_only jobs only, so the cycle borrows them one by one in queue order, after the
    In-Quota admissions of L's and B's idle-none jobs (nothing running can be evicted)."""
    nodes = tuple(
        Node(f"n{i}", "a100", draw(st.sampled_from((4, 8))), 64000, 65536)
        for i in range(draw(st.integers(1, 4)))
    )
    cap = sum(n.gpus for n in nodes) * MILLI
    root = draw(st.integers(0, cap // MILLI)) * MILLI
    b_min = draw(st.integers(0, root // MILLI)) * MILLI
    b_max = None
    if draw(st.booleans()):
        b_max = {"a100": Resources(b_min + draw(st.integers(0, 16)) * MILLI)}
    quotas = (
        Quota("R", None, {"a100": Resources(root)}),
        Quota("B", "R", {"a100": Resources(b_min)}, b_max),
        Quota("L", "R", {"a100": Resources(root - b_min)}),
    )
    workloads = []
    for i in range(draw(st.integers(1, 10))):
        idle_only = draw(st.booleans())
        workloads.append(
            Workload(
                f"j{i}",
                "B" if idle_only else draw(st.sampled_from(("B", "L"))),
                "training",
                draw(st.integers(1, 2)),
                Resources(draw(st.sampled_from((500, 1000, 2000, 4000))), 1000, 1024),
                ("a100",),
                priority=draw(st.integers(1, 9)),
                idle="idle_only" if idle_only else "none",
                submitted_at=float(i),
            )
        )
    return Snapshot(100, nodes, quotas, tuple(workloads))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(borrowing_queues())
def test_the_idle_count_is_what_the_admissions_ahead_of_it_left(snap: Snapshot) -> None:
    result = run_cycle(snap)
    assert not result.preempted
    by_name = {w.name: w for w in snap.workloads}
    root = next(q for q in snap.quotas if q.name == "R").min["a100"].gpu
    cap = sum(n.gpus for n in snap.nodes) * MILLI
    started = {a.workload: a for a in result.admitted}
    in_quota = sum(
        by_name[a].request.gpu * len(adm.placements) for a, adm in started.items() if adm.in_quota
    )
    pending = {p.workload: p.reason for p in result.pending}
    borrowed = 0  # what the borrowers ahead of it (in queue order) took
    queue = sorted(
        (w for w in snap.workloads if w.idle == "idle_only"),
        key=lambda w: (-w.priority, w.submitted_at, w.name),
    )
    for w in queue:
        idle = max(0, min(cap, root) - in_quota - borrowed)
        if w.name in started:
            assert not started[w.name].in_quota
            borrowed += w.request.gpu * len(started[w.name].placements)
            continue
        reason = pending[w.name]
        q_b = next(q for q in snap.quotas if q.name == "B")
        if m := IDLE.search(reason):
            assert (milli(m[1]), milli(m[2])) == (idle, w.request.gpu * w.replicas), reason
        elif m := MAX.search(reason):
            used = sum(
                by_name[a].request.gpu * len(adm.placements)
                for a, adm in started.items()
                if by_name[a].quota == "B"
                and (adm.in_quota or queue.index(by_name[a]) < queue.index(w))
            )
            assert q_b.max is not None
            assert (milli(m[2]), milli(m[4]), milli(m[5])) == (
                q_b.max["a100"].gpu,
                used,
                w.request.gpu * w.replicas,
            ), reason
        elif reason == "Quota B may not use pool a100":
            assert q_b.max is not None and q_b.max["a100"].gpu == 0
        elif m := GANG.match(reason):
            # a gang of two of which one fits
            assert (int(m[1]), int(m[2])) == (1, w.replicas), reason
        else:
            assert reason.startswith("no node in pool a100"), reason
