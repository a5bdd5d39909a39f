"""Fair-share borrowing: what a cycle lets a borrower take, the next cycle lets it keep."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import MILLI, Node, Quota, Resources, Snapshot, Workload

from .builders import nodes, quota, snapshot, workload
from .test_stability import two_cycles

POOL = "a100"


@st.composite
def borrowing_clusters(draw: st.DrawFn) -> Snapshot:
    """Teams under one root with idle capacity to lend, a running set started by a first
    cycle, then a wave of new work: many borrowers competing for the same idle GPUs."""
    node_count = draw(st.integers(2, 6))
    gpus = draw(st.sampled_from((4, 8)))
    nodes = tuple(Node(f"n{i}", POOL, gpus, 64_000, 262_144) for i in range(node_count))
    total = node_count * gpus
    quotas = [Quota("r", None, {POOL: Resources(total * MILLI)})]
    room = {"r": total}
    for t in range(draw(st.integers(2, 5))):
        parent = draw(st.sampled_from(sorted(room)))
        g = draw(st.integers(0, room[parent] // 2))
        room[parent] -= g
        room[f"t{t}"] = g
        quotas.append(
            Quota(
                f"t{t}",
                parent,
                {POOL: Resources(g * MILLI)},
                child_preemption=draw(st.booleans()),
                weight=draw(st.sampled_from((None, 1.0, 2.0, 3.0))),
                queue=draw(st.sampled_from(("priority", "fifo"))),
            )
        )
    names = [q.name for q in quotas]

    def wave(prefix: str, count: int, at: float) -> list[Workload]:
        out = []
        for i in range(count):
            kind = draw(st.sampled_from(("training",) * 5 + ("inference", "interactive")))
            out.append(
                Workload(
                    name=f"{prefix}{i}",
                    quota=draw(st.sampled_from(names[1:] if kind == "training" else names)),
                    kind=kind,
                    replicas=draw(st.integers(1, 2)),
                    request=Resources(draw(st.sampled_from((500, 1000, 2000, 4000, 8000)))),
                    pools=(POOL,),
                    priority=draw(st.integers(1, 9)),
                    idle=draw(st.sampled_from(("none", "acceptable", "idle_only", "idle_only"))),
                    submitted_at=at + i,
                )
            )
        return out

    first = wave("w", draw(st.integers(0, 24)), 0.0)
    snap = Snapshot(100, nodes, tuple(quotas), tuple(first))
    result = run_cycle(snap)
    placed = {a.workload: a.placements for a in result.admitted}
    running = [
        replace(w, running=placed[w.name], started_at=100 + i, last_checkpoint_at=None)
        for i, w in enumerate(first)
        if w.name in placed
    ]
    later = wave("p", draw(st.integers(1, 24)), 200.0)
    return Snapshot(1000, nodes, tuple(quotas), tuple(running + later))


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(borrowing_clusters())
def test_fair_share_reclaim_never_evicts_what_the_cycle_before_admitted(snap: Snapshot) -> None:
    first, second = two_cycles(snap)
    admitted = {a.workload for a in first.admitted}
    thrash = [p for p in second.preempted if p.workload in admitted and p.reason == "fair_share"]
    assert not thrash, (first, second)


def leftover_beyond_share() -> Snapshot:
    """18 idle GPUs: n2 whole, 6 on n3, 4 on n1 next to a's borrower; a asks for 12 more
    (8 then 4), b for one whole node.

    Weights 1:1 over 22 borrowable GPUs: b's share is its 8, a's the other 14. a's 8-GPU
    job comes first and takes n2 within a's share; b's job then fits no hole; a's 4-GPU job
    is beyond a's share but fits the idle left over on n1.
    """
    return snapshot(
        nodes(3),
        [
            quota("r").min(gpu=24),
            quota("a").parent("r").min(gpu=0).weight(1),
            quota("b").parent("r").min(gpu=0).weight(1),
            quota("lender").parent("r").min(gpu=24),
        ],
        [
            workload("a-old").quota("a").gpus(4).idle("idle_only").on("n1"),
            workload("lent").quota("lender").gpus(2).on("n3"),
            workload("a-node").quota("a").gpus(8).idle("idle_only").submitted(1),
            workload("b-node").quota("b").gpus(8).idle("idle_only").submitted(2),
            workload("a-half").quota("a").gpus(4).idle("idle_only").submitted(3),
        ],
    )


def test_a_borrower_below_its_share_gets_its_turn_before_leftover_idle_goes_beyond_shares() -> None:
    # Before, a-half took the idle left over on n1 and b-node waited; the next cycle evicted
    # a-half (started one cycle earlier) and a-old for b-node by fair-share reclaim. Now
    # b-node's reclaim runs in the same cycle, so a-half never starts to be killed at once.
    first, second = two_cycles(leftover_beyond_share())
    assert {a.workload: a.in_quota for a in first.admitted} == {
        "a-node": False,
        "b-node": False,
        "a-old": False,  # evicted from n1, restarted on n3's idle GPUs
    }
    assert {p.workload: (p.by, p.reason) for p in first.preempted} == {
        "a-old": ("b-node", "fair_share")
    }
    assert [p.workload for p in first.pending] == ["a-half"]
    assert not second.preempted and not second.admitted


def pushed_out_by_a_borrower_ranking_ahead() -> Snapshot:
    """Quota team (2 GPUs) is full: sub's job In Quota and team's own low-priority job.

    hi (priority 3, acceptable) cannot run In Quota, so it borrows; mid (priority 2, idle
    none) fits In Quota by taking low's place. Ranked by priority, hi then takes team's 2
    GPUs In Quota and pushes mid out of quota.
    """
    return snapshot(
        nodes(2, gpus=4),
        [
            quota("r").min(gpu=8),
            quota("team").parent("r").min(gpu=2),
            quota("sub").parent("team").min(gpu=1),
        ],
        [
            workload("sub-job").quota("sub").gpus(1).priority(2).on("n1"),
            workload("low").quota("team").gpus(1).priority(1).on("n1"),
            workload("hi").quota("team").gpus(2).priority(3).idle("acceptable").submitted(1),
            workload("mid").quota("team").gpus(1).priority(2).submitted(2),
        ],
    )


def test_an_idle_none_job_is_never_admitted_not_in_quota() -> None:
    first, second = two_cycles(pushed_out_by_a_borrower_ranking_ahead())
    assert {a.workload: a.in_quota for a in first.admitted} == {"hi": True}
    (pending,) = first.pending
    assert pending.workload == "mid"
    assert "idle borrowing is off for this job" in pending.reason
    assert not second.admitted and not second.preempted
