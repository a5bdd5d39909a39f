"""DESIGN §1's central rule, case by case (issue 13): a label is state, kept while the
workload runs; only a smaller min or a parent's child-level preemption takes it away; every
victim's and every waiting workload's sentence is true."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import Snapshot

from .builders import WorkloadBuilder, nodes, quota, snapshot, workload
from .test_stability import two_cycles


def issue_13(*extra: WorkloadBuilder, x: WorkloadBuilder | None = None) -> Snapshot:
    """R (16) over A and L (8 each), two 8-GPU nodes; A's x runs In Quota on n1, L is idle."""
    incumbent = x or workload("x").quota("A").gpus(8).priority(5).started(10).on("n1")
    return snapshot(
        nodes(2),
        [
            quota("R").min(gpu=16),
            quota("A").parent("R").min(gpu=8),
            quota("L").parent("R").min(gpu=8),
        ],
        [incumbent, *extra],
        now=100,
    )


def newcomer(idle: str) -> WorkloadBuilder:
    """Issue 13's y: A's priority-9 job, submitted after x started."""
    return workload("y").quota("A").gpus(8).priority(9).idle(idle).submitted(50)


def borrowed_y(label: bool | None) -> WorkloadBuilder:
    """y after issue 13's cycle: running on L's node, Not in Quota (or unknown: started last)."""
    y = newcomer("acceptable").started(100).on("n2")
    return y if label is None else y.labelled(label)


def lender_submits() -> WorkloadBuilder:
    return workload("l1").quota("L").gpus(8).submitted(150)


def scaled(min_a: float, *running: WorkloadBuilder, labels: bool | None = None) -> Snapshot:
    """A's min scaled down to min_a under R (16) with an idle lender L (8)."""
    return snapshot(
        nodes(2, gpus=8),
        [
            quota("R").min(gpu=16),
            quota("A").parent("R").min(gpu=min_a),
            quota("L").parent("R").min(gpu=8),
        ],
        [w if labels is None else w.labelled(labels) for w in running],
    )


def two_levels(other: WorkloadBuilder) -> Snapshot:
    """R (8) over A (8) and L (0, after a rebalance gave its 8 to A): A's b borrowed when it
    started, next to another workload."""
    return snapshot(
        nodes(2),
        [
            quota("R").min(gpu=8),
            quota("A").parent("R").min(gpu=8),
            quota("L").parent("R").min(gpu=0),
        ],
        [workload("b").quota("A").gpus(8).idle("acceptable").on("n1").labelled(False), other],
    )


def child_level(*pending: WorkloadBuilder) -> Snapshot:
    """R (child preemption, 16) over A and B (8 each) on 24 GPUs, both children In Quota."""
    return snapshot(
        nodes(3),
        [
            quota("R").min(gpu=16).child_preemption(),
            quota("A").parent("R").min(gpu=8),
            quota("B").parent("R").min(gpu=8),
        ],
        [
            workload("a1").quota("A").gpus(8).priority(5).started(10).on("n1"),
            workload("b1").quota("B").gpus(8).priority(1).started(20).on("n2"),
            *pending,
        ],
    )


def lending(job: WorkloadBuilder, b_max: dict[str, float] | None = None) -> Snapshot:
    """B (min 8 in a100) is full with its own job on n1; L (16) lends n2 and n3; t4 has a
    node nobody uses, which only R's min covers."""
    b = quota("B").parent("R").min(gpu=8)
    for pool, gpus in (b_max or {}).items():
        b = b.max(gpu=gpus, pool=pool)
    return snapshot(
        [*nodes(3), *nodes(1, gpus=4, pool="t4", prefix="t")],
        [
            quota("R").min(gpu=24).min(gpu=4, pool="t4"),
            b,
            quota("L").parent("R").min(gpu=16).min(gpu=4, pool="t4"),
        ],
        [workload("own").quota("B").gpus(8).started(1).on("n1"), job],
    )


@dataclass
class Rule:
    """A scenario and every decision of its cycle that the rule fixes."""

    build: Callable[[], Snapshot]
    admitted: dict[str, bool] = field(default_factory=dict)  # name -> In Quota
    preempted: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # by, reason, quota
    demoted: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # by, reason, quota
    classification: dict[str, bool] = field(default_factory=dict)  # every running workload
    pending: dict[str, str] = field(default_factory=dict)  # name -> the exact sentence


RULES = {
    # Issue 13: y outranks x but wins no label by it. x stays In Quota, y borrows L's node.
    "an_incumbent_keeps_in_quota_and_an_acceptable_newcomer_borrows": Rule(
        lambda: issue_13(newcomer("acceptable")),
        admitted={"y": False},
        classification={"x": True, "y": False},
    ),
    # ... and when L wants its node back, y is the one reclaimed, on L's capacity. Waiting
    # again with no idle capacity left, y (priority 9) then wins A's place from x (5) by a
    # named priority preemption, as DESIGN's kind 3 allows: never by a relabel.
    "the_borrower_is_the_reclaim_victim_when_the_lender_submits": Rule(
        lambda: issue_13(borrowed_y(False), lender_submits(), x=incumbent(True)),
        admitted={"l1": True, "y": True},
        preempted={"y": ("l1", "reclaim", "L"), "x": ("y", "priority", "A")},
        classification={"y": True, "l1": True},
        pending={
            "x": "Quota A has 0 of 8 GPUs free in pool a100 (the job needs 8 GPUs), and idle "
            "borrowing is off for this job"
        },
    ),
    "without_labels_start_order_gives_the_same_reclaim_victim": Rule(
        lambda: issue_13(borrowed_y(None), lender_submits()),
        admitted={"l1": True, "y": True},
        preempted={"y": ("l1", "reclaim", "L"), "x": ("y", "priority", "A")},
        classification={"y": True, "l1": True},
        pending={
            "x": "Quota A has 0 of 8 GPUs free in pool a100 (the job needs 8 GPUs), and idle "
            "borrowing is off for this job"
        },
    ),
    # At equal priority y has nothing to win A's place with: it waits.
    "a_reclaimed_borrower_of_equal_priority_waits_and_the_incumbent_stays": Rule(
        lambda: issue_13(borrowed_y(False).priority(5), lender_submits(), x=incumbent(True)),
        admitted={"l1": True},
        preempted={"y": ("l1", "reclaim", "L")},
        classification={"x": True, "l1": True},
        pending={
            "y": "Quota A has 0 of 8 GPUs free in pool a100 (the job needs 8 GPUs), and only 0 "
            "idle GPUs can be borrowed there (it needs 8 GPUs)"
        },
    ),
    # A newcomer that may only run In Quota wins x's place by a named priority preemption,
    # though L's node is idle: it does not borrow, and it takes no label by outranking.
    "an_idle_none_newcomer_takes_the_place_by_a_named_priority_preemption": Rule(
        lambda: issue_13(newcomer("none")),
        admitted={"y": True},
        preempted={"x": ("y", "priority", "A")},
        classification={"y": True},
        pending={
            "x": "Quota A has 0 of 8 GPUs free in pool a100 (the job needs 8 GPUs), and idle "
            "borrowing is off for this job"
        },
    ),
    # Same priority: nothing to win the place with, and idle none never borrows.
    "an_idle_none_newcomer_of_equal_priority_waits": Rule(
        lambda: issue_13(newcomer("none").priority(5)),
        classification={"x": True},
        pending={
            "y": "Quota A has 0 of 8 GPUs free in pool a100 (the job needs 8 GPUs), and idle "
            "borrowing is off for this job"
        },
    ),
    # An acceptable newcomer evicts by priority only when no idle capacity is left to borrow.
    "an_acceptable_newcomer_evicts_by_priority_only_without_idle_capacity": Rule(
        lambda: issue_13(
            newcomer("acceptable"), workload("l0").quota("L").gpus(8).started(20).on("n2")
        ),
        admitted={"y": True},
        preempted={"x": ("y", "priority", "A")},
        classification={"y": True, "l0": True},
        pending={
            "x": "Quota A has 0 of 8 GPUs free in pool a100 (the job needs 8 GPUs), and idle "
            "borrowing is off for this job"
        },
    ),
    "labels_unknown_are_inferred_in_start_order_not_by_priority": Rule(
        lambda: issue_13(newcomer("acceptable").started(60).on("n2")),
        classification={"x": True, "y": False},
    ),
    "a_borrowed_workload_turns_in_quota_once_its_quota_has_room": Rule(
        lambda: issue_13(x=borrowed_y(False).on("n1")),
        classification={"y": True},
    ),
    "room_for_one_of_two_borrowers_goes_to_the_higher_ranked": Rule(
        lambda: scaled(
            8,
            workload("b3").quota("A").gpus(8).priority(3).idle("acceptable").on("n1"),
            workload("b7").quota("A").gpus(8).priority(7).idle("acceptable").on("n2"),
            labels=False,
        ),
        classification={"b3": False, "b7": True},
    ),
    "room_in_the_quota_but_not_in_its_parent_keeps_it_not_in_quota": Rule(
        lambda: two_levels(workload("r").quota("R").gpus(8).on("n2").labelled(True)),
        classification={"b": False, "r": True},
    ),
    # A rebalance moved L's min to A: l turns Not in Quota (named), and the borrower b, whose
    # chain has room now, turns In Quota.
    "a_min_moved_away_from_a_child_gives_its_room_to_a_borrowing_sibling": Rule(
        lambda: two_levels(workload("l").quota("L").gpus(8).on("n2").labelled(True)),
        demoted={"l": ("", "min", "L")},
        classification={"b": True, "l": False},
    ),
    # A min scaled from 16 to 8 under four In-Quota workloads: the walk keeps the service
    # (non-preemptible first), then priority, then the oldest start; the rest is named.
    "a_smaller_min_keeps_in_design_order_and_names_the_rest": Rule(
        lambda: scaled(
            8,
            workload("svc").quota("A").inference().gpus(4).priority(1).started(90).on("n1"),
            workload("t9").quota("A").gpus(2).priority(9).started(80).on("n2"),
            workload("old5").quota("A").gpus(2).priority(5).started(10).on("n1"),
            workload("new5").quota("A").gpus(2).priority(5).started(20).on("n1"),
            labels=True,
        ),
        demoted={"new5": ("", "min", "A")},
        classification={"svc": True, "t9": True, "old5": True, "new5": False},
    ),
    # A CPU min scaled below what a and b hold In Quota: b (started later) turns Not in
    # Quota; g, labelled here for the first time, holds no CPU, so the CPU row does not
    # keep it out (a row is only checked for what a workload adds, as admission does).
    "a_row_over_its_cpu_min_keeps_out_only_what_adds_cpu": Rule(
        lambda: snapshot(
            nodes(1),
            [quota("q").min(gpu=4, cpu=12_000)],
            [
                workload("a").quota("q").cpu(8_000).started(10).on("n1").labelled(True),
                workload("b").quota("q").cpu(6_000).started(20).on("n1").labelled(True),
                workload("g").quota("q").gpus(1).started(30).on("n1"),
            ],
        ),
        demoted={"b": ("", "min", "q")},
        classification={"a": True, "b": False, "g": True},
    ),
    # The min shrank under an idle-none job: it is preemptible now, and the reason its
    # eviction gives is the smaller min, not borrowing (it never borrowed).
    "a_job_left_out_by_a_smaller_min_is_evicted_for_that_reason": Rule(
        lambda: snapshot(
            nodes(2),
            [
                quota("R").min(gpu=16),
                quota("A").parent("R").min(gpu=0),
                quota("L").parent("R").min(gpu=16),
            ],
            [
                workload("t").quota("A").gpus(8).started(10).on("n1").labelled(True),
                workload("l0").quota("L").gpus(8).started(20).on("n2"),
                workload("l1").quota("L").gpus(8).submitted(50),
            ],
        ),
        admitted={"l1": True},
        preempted={"t": ("l1", "min", "A")},
        classification={"l0": True, "l1": True},
        pending={
            "t": "Quota A has 0 of 0 GPUs free in pool a100 (the job needs 8 GPUs), and idle "
            "borrowing is off for this job"
        },
    ),
    # The parent's own workload starts In Quota on the idle node: its children's In-Quota
    # usage is room for it, and the walk (parent's own first) turns b1 Not in Quota, named.
    "a_parent_own_admission_turns_its_lowest_child_not_in_quota_and_names_it": Rule(
        lambda: child_level(workload("p1").quota("R").gpus(8).submitted(50)),
        admitted={"p1": True},
        demoted={"b1": ("p1", "child_preemption", "R")},
        classification={"a1": True, "b1": False, "p1": True},
    ),
    "idle_only_is_not_in_quota_whatever_its_label_says": Rule(
        lambda: issue_13(
            x=workload("x").quota("A").gpus(8).idle("idle_only").on("n1").labelled(True)
        ),
        classification={"x": False},
    ),
    # Borrowing blocked by a max: the sentence names the max and the numbers.
    "a_max_that_blocks_borrowing_is_named_with_its_numbers": Rule(
        lambda: lending(
            workload("job").quota("B").gpus(8).idle("acceptable").submitted(5), {"a100": 12}
        ),
        classification={"own": True},
        pending={
            "job": "Quota B has 0 of 8 GPUs free in pool a100 (the job needs 8 GPUs), and "
            "Quota B may use at most 12 GPUs in a100; it uses 8 and the job needs 8"
        },
    ),
    "a_max_of_zero_forbids_the_pool": Rule(
        lambda: lending(
            workload("job").quota("B").gpus(1).pools("t4").idle("acceptable").submitted(5),
            {"a100": 16, "t4": 0},
        ),
        classification={"own": True},
        pending={"job": "Quota B may not use pool t4"},
    ),
    # The idle count is what the borrowers ahead of it left: 16 at the start of the cycle,
    # 8 after j1 borrowed n2.
    "the_idle_count_is_what_the_admissions_ahead_left": Rule(
        lambda: snapshot(
            nodes(3),
            [
                quota("R").min(gpu=24),
                quota("B").parent("R").min(gpu=8),
                quota("L").parent("R").min(gpu=16),
            ],
            [
                workload("own").quota("B").gpus(8).started(1).on("n1"),
                workload("j1").quota("B").gpus(8).idle("idle_only").submitted(5),
                workload("j2").quota("B").gpus(8).replicas(2).idle("acceptable").submitted(6),
            ],
        ),
        admitted={"j1": False},
        classification={"own": True, "j1": False},
        pending={
            "j2": "Quota B has 0 of 8 GPUs free in pool a100 (the job needs 16 GPUs), and only "
            "8 idle GPUs can be borrowed there (it needs 16 GPUs)"
        },
    ),
}


def incumbent(label: bool) -> WorkloadBuilder:
    """Issue 13's x with its label."""
    return workload("x").quota("A").gpus(8).priority(5).started(10).on("n1").labelled(label)


@pytest.mark.parametrize("rule", list(RULES.values()), ids=list(RULES))
def test_the_central_rule(rule: Rule) -> None:
    result = run_cycle(rule.build())
    assert {a.workload: a.in_quota for a in result.admitted} == rule.admitted
    assert {p.workload: (p.by, p.reason, p.quota) for p in result.preempted} == rule.preempted
    assert {d.workload: (d.by, d.reason, d.quota) for d in result.demoted} == rule.demoted
    assert dict(result.classification) == rule.classification
    assert {p.workload: p.reason for p in result.pending} == rule.pending


def test_issue_13_over_two_cycles_reclaims_the_borrower_never_the_incumbent() -> None:
    first, second = two_cycles(issue_13(newcomer("acceptable")))
    assert dict(first.classification) == {"x": True, "y": False}
    third = run_cycle(
        snapshot(
            nodes(2),
            [
                quota("R").min(gpu=16),
                quota("A").parent("R").min(gpu=8),
                quota("L").parent("R").min(gpu=8),
            ],
            [incumbent(True), borrowed_y(second.classification["y"]), lender_submits()],
            now=200,
        )
    )
    assert not second.preempted and not second.admitted
    # y, the borrower, is reclaimed; x is never a reclaim victim (y then evicts it by
    # priority, a named preemption of its own quota)
    assert [(p.workload, p.reason, p.quota) for p in third.preempted] == [
        ("y", "reclaim", "L"),
        ("x", "priority", "A"),
    ]
