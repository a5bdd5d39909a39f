"""Fair-share borrowing: what a cycle lets a borrower take, the next cycle lets it keep."""

from __future__ import annotations

from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import Snapshot

from .builders import nodes, quota, snapshot, workload
from .test_stability import two_cycles


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
    none) takes low's place by priority preemption. Before DESIGN §1's rule, hi then took
    team's 2 GPUs In Quota by outranking mid and pushed mid out of quota; a label is kept now.
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
    assert {a.workload: a.in_quota for a in first.admitted} == {"mid": True, "hi": False}
    assert {p.workload: (p.by, p.reason) for p in first.preempted} == {"low": ("mid", "priority")}
    assert not first.demoted
    # low, evicted and retried in the cycle, says at once why it waits, as the next cycle does
    (pending,) = first.pending
    assert pending.workload == "low"
    assert "idle borrowing is off for this job" in pending.reason
    assert second.pending == first.pending
    assert not second.admitted and not second.preempted
    assert dict(second.classification) == dict(first.classification)


def cpu_hungry_borrower(gpus: float) -> Snapshot:
    """a borrows all 8 GPUs of n1 in two 4-GPU jobs holding 80 of its 96 cores; b waits to
    borrow 4 GPUs (b-wide, which no node can hold: it asks for more cores than a node has),
    so a's fair share is 4 and it is above it. b-next asks for 20 cores and `gpus`.
    """
    return snapshot(
        nodes(1),
        [
            quota("r").min(gpu=8),
            quota("a").parent("r").min(gpu=0).weight(1),
            quota("b").parent("r").min(gpu=0).weight(1),
            quota("lender").parent("r").min(gpu=8),
        ],
        [
            workload("a1").quota("a").gpus(4).cpu(40_000).idle("idle_only").on("n1"),
            workload("a2").quota("a").gpus(4).cpu(40_000).idle("idle_only").on("n1"),
            workload("b-wide").quota("b").gpus(4).cpu(100_000).idle("idle_only").submitted(1),
            workload("b-next").quota("b").gpus(gpus).cpu(20_000).idle("idle_only").submitted(2),
        ],
    )


def test_a_borrower_needing_no_gpu_never_evicts_by_fair_share() -> None:
    # Fair shares are of borrowed GPUs: a borrower that needs none gains no share by an
    # eviction, which would only free a GPU job's cores and leave its GPUs idle.
    result = run_cycle(cpu_hungry_borrower(0))
    assert not result.preempted
    reasons = {p.workload: p.reason for p in result.pending}
    assert set(reasons) == {"b-wide", "b-next"}
    assert reasons["b-next"] == "no node in pool a100 has 20000 free millicores"


def test_a_gpu_borrower_below_its_share_evicts_by_fair_share() -> None:
    result = run_cycle(cpu_hungry_borrower(4))
    assert [(p.by, p.reason) for p in result.preempted] == [("b-next", "fair_share")]
    assert [a.workload for a in result.admitted] == ["b-next"]
