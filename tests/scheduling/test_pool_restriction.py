"""Quotas restricted to node pools (issue 13, Run:ai's "projects on specific nodes"): their
workloads, and their descendants', are never placed, borrowed or upgraded outside the pools
they allow, and a workload that can go nowhere else says which quota keeps it out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import Snapshot

from .builders import QuotaBuilder, WorkloadBuilder, nodes, quota, snapshot, workload


def cluster(
    *ws: WorkloadBuilder, a: tuple[str, ...] = ("a100",), a1: tuple[str, ...] = ()
) -> Snapshot:
    """R (16 a100, 8 t4) over A (8 a100, allowed `a`) with child A.1, and lender L (8 a100,
    8 t4): two 8-GPU a100 nodes n1, n2 and one 8-GPU t4 node t1."""
    return snapshot(
        [*nodes(2), *nodes(1, pool="t4", prefix="t")],
        [
            quota("R").min(gpu=16).min(gpu=8, pool="t4"),
            quota("A").parent("R").min(gpu=8).pools(*a),
            quota("A.1").parent("A").min(gpu=0).pools(*a1),
            quota("L").parent("R").min(gpu=8).min(gpu=8, pool="t4"),
        ],
        list(ws),
    )


def lender_busy() -> WorkloadBuilder:
    """L's own job fills n2, so a100 has no idle GPU left."""
    return workload("l-own").quota("L").gpus(8).started(1).on("n2")


def guaranteed_t4(*ws: WorkloadBuilder, a: tuple[str, ...]) -> Snapshot:
    """A holds a min of 8 on t4 (a scenario may say so; the console refuses it) and allows `a`."""
    qa: QuotaBuilder = quota("A").parent("R").min(gpu=8).min(gpu=8, pool="t4").pools(*a)
    return snapshot(
        [*nodes(1), *nodes(1, pool="t4", prefix="t")],
        [quota("R").min(gpu=8).min(gpu=8, pool="t4"), qa],
        list(ws),
    )


@dataclass
class Case:
    """A scenario and what its cycle does that a user sees."""

    build: Callable[[], Snapshot]
    placed: dict[str, tuple[bool, set[str]]] = field(default_factory=dict)  # In Quota, pools
    preempted: dict[str, tuple[str, str]] = field(default_factory=dict)  # by, reason
    classification: dict[str, bool] | None = None
    pending: dict[str, str] = field(default_factory=dict)


CASES = {
    # Borrowing: the job lists t4 first and t4 is idle, but A may run only in a100.
    "a_borrower_borrows_only_in_its_allowed_pools": Case(
        lambda: cluster(workload("j").quota("A").gpus(8).pools("t4", "a100").idle("idle_only")),
        placed={"j": (False, {"a100"})},
    ),
    # A one-replica job's pools are a set: placement scores nodes across them, so here the
    # a100 nodes are taken to show that the unrestricted borrower may go to t4.
    "without_a_restriction_the_same_borrower_may_take_t4": Case(
        lambda: cluster(
            lender_busy(),
            workload("l-two").quota("L").gpus(8).started(1).on("n1"),
            workload("j").quota("A").gpus(8).pools("t4", "a100").idle("idle_only"),
            a=(),
        ),
        placed={"j": (False, {"t4"})},
    ),
    "a_job_asking_only_for_a_forbidden_pool_waits_and_says_why": Case(
        lambda: cluster(workload("j").quota("A").gpus(8).pools("t4").idle("acceptable")),
        pending={"j": "Quota A may not use pool t4; it may run only in a100"},
    ),
    "a_child_quota_is_held_to_its_parents_pools": Case(
        lambda: cluster(workload("j").quota("A.1").gpus(1).pools("t4").idle("idle_only")),
        pending={"j": "Quota A may not use pool t4; it may run only in a100"},
    ),
    "a_child_quota_may_narrow_its_parents_pools": Case(
        lambda: cluster(
            workload("j").quota("A.1").gpus(1).pools("a100").idle("idle_only"),
            a=("a100", "t4"),
            a1=("t4",),
        ),
        pending={"j": "Quota A.1 may not use pool a100; it may run only in t4"},
    ),
    "every_forbidden_pool_is_named": Case(
        lambda: cluster(workload("j").quota("A").gpus(1).pools("t4", "v100").idle("idle_only")),
        pending={"j": "Quota A may not use pool t4 or v100; it may run only in a100"},
    ),
    # a100 holds no idle GPU; t4's idle GPUs are out of A's reach, and the sentence speaks
    # of the pool A may use.
    "no_idle_capacity_is_borrowed_from_a_forbidden_pool": Case(
        lambda: cluster(
            lender_busy(),
            workload("own").quota("A").gpus(8).started(1).on("n1"),
            workload("j").quota("A").gpus(8).pools("a100", "t4").idle("idle_only").submitted(5),
        ),
        classification={"l-own": True, "own": True},
        pending={
            "j": "the job runs on idle capacity only (Only Idle Resources), and only 0 idle GPUs "
            "can be borrowed there (it needs 8 GPUs)"
        },
    ),
    # With t4 forbidden, A's urgent job takes its place in a100 by priority rather than
    # borrowing the idle t4 node it would take without the restriction.
    "a_restricted_job_evicts_by_priority_rather_than_borrow_a_forbidden_pool": Case(
        lambda: cluster(
            lender_busy(),
            workload("low").quota("A").gpus(8).priority(1).started(1).on("n1"),
            workload("urgent")
            .quota("A")
            .gpus(8)
            .priority(9)
            .pools("a100", "t4")
            .idle("acceptable")
            .submitted(5),
        ),
        placed={"urgent": (True, {"a100"})},
        preempted={"low": ("urgent", "priority")},
        pending={
            "low": "Quota A has 0 of 8 GPUs free in pool a100 (the job needs 8 GPUs), and idle "
            "borrowing is off for this job"
        },
    ),
    "without_a_restriction_the_urgent_job_borrows_the_idle_pool_instead": Case(
        lambda: cluster(
            lender_busy(),
            workload("low").quota("A").gpus(8).priority(1).started(1).on("n1"),
            workload("urgent")
            .quota("A")
            .gpus(8)
            .priority(9)
            .pools("a100", "t4")
            .idle("acceptable")
            .submitted(5),
            a=(),
        ),
        placed={"urgent": (False, {"t4"})},
    ),
    "a_services_replicas_spread_only_over_allowed_pools": Case(
        lambda: cluster(
            workload("svc").quota("A").inference().replicas(2).gpus(4).pools("t4", "a100")
        ),
        placed={"svc": (True, {"a100"})},
    ),
    # A job still running borrowed in a pool its quota no longer allows keeps running, but
    # never turns In Quota there, whatever min the quota holds in that pool.
    "a_borrower_left_in_a_forbidden_pool_is_not_upgraded": Case(
        lambda: guaranteed_t4(
            workload("old").quota("A").gpus(8).pools("t4").on("t1").labelled(False),
            a=("a100",),
        ),
        classification={"old": False},
    ),
    "without_a_restriction_the_same_borrower_is_upgraded": Case(
        lambda: guaranteed_t4(
            workload("old").quota("A").gpus(8).pools("t4").on("t1").labelled(False), a=()
        ),
        classification={"old": True},
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_quota_node_pools(case: Case) -> None:
    snap = case.build()
    result = run_cycle(snap)
    pool_of = {n.name: n.pool for n in snap.nodes}
    placed = {
        a.workload: (a.in_quota, {pool_of[p.node] for p in a.placements}) for a in result.admitted
    }
    assert placed == case.placed
    assert {p.workload: (p.by, p.reason) for p in result.preempted} == case.preempted
    assert {p.workload: p.reason for p in result.pending} == case.pending
    if case.classification is not None:
        assert dict(result.classification) == case.classification
