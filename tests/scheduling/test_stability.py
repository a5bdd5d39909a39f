"""Stability: a cycle's decisions hold on the next cycle; borrowing never evicts anything."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings

from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import CycleResult, Snapshot

from .builders import QuotaBuilder, WorkloadBuilder, nodes, quota, snapshot, workload
from .test_properties import PLAIN, Size, clusters, random_cluster
from .test_scenarios import pushed_out_then_reclaimed


def next_snapshot(snap: Snapshot, result: CycleResult) -> Snapshot:
    """The snapshot after applying a cycle: admitted run where placed, victims pending again,
    and every running workload carries the label the cycle gave it (the label is state).

    A victim retried and admitted in the same cycle restarts at its new placements.
    """
    placed = {a.workload: a.placements for a in result.admitted}
    gone = {p.workload for p in result.preempted}
    labels = result.classification
    out = []
    for w in snap.workloads:
        if w.name in gone:
            w = replace(w, running=(), started_at=None, last_checkpoint_at=None, in_quota=None)
        if w.name in gone and w.name not in placed:
            out.append(w)
        elif w.name in placed:
            started = w.started_at if w.running else snap.now
            out.append(
                replace(
                    w,
                    running=w.running + placed[w.name],
                    started_at=started,
                    last_checkpoint_at=w.last_checkpoint_at if w.running else snap.now,
                    in_quota=labels[w.name],
                )
            )
        elif w.running:
            out.append(replace(w, in_quota=labels[w.name]))
        else:
            out.append(w)
    return replace(snap, workloads=tuple(out))


def two_cycles(snap: Snapshot) -> tuple[CycleResult, CycleResult]:
    """Run a cycle, apply it, and run again at the same `now` with no arrival."""
    first = run_cycle(snap)
    return first, run_cycle(next_snapshot(snap, first))


STABLE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def no_admission_is_evicted_next_cycle(snap: Snapshot) -> None:
    """A second cycle never evicts what the first admitted."""
    first, second = two_cycles(snap)
    admitted = {a.workload for a in first.admitted}
    victims = {p.workload for p in second.preempted}
    assert not (victims & admitted), (first, second)


def no_one_is_preempted_twice_running(snap: Snapshot) -> None:
    """A victim is not readmitted in the next cycle, nor preempted in two cycles running."""
    first, second = two_cycles(snap)
    evicted = {p.workload for p in first.preempted}
    assert not (evicted & {a.workload for a in second.admitted}), (first, second)
    third = run_cycle(next_snapshot(next_snapshot(snap, first), second))
    again = {p.workload for p in second.preempted} & {p.workload for p in third.preempted}
    assert not again, (second, third)


def labels_hold_next_cycle(snap: Snapshot) -> None:
    """The labels given at admission hold in the next cycle."""
    first, second = two_cycles(snap)
    victims = {p.workload for p in second.preempted}
    for a in first.admitted:
        if a.workload in victims:
            continue
        assert second.classification[a.workload] == a.in_quota, a.workload


def only_fair_share_makes_room_for_a_borrower(snap: Snapshot) -> None:
    """Only fair-share reclaim evicts for a borrower, and only a borrower reclaims so."""
    result = run_cycle(snap)
    labels = {a.workload: a.in_quota for a in result.admitted}
    idle = {w.name: w.idle for w in snap.workloads}
    for p in result.preempted:
        borrows = not labels[p.by]
        assert idle[p.by] != "idle_only" or borrows, p  # idle_only never runs In Quota
        # fair-share reclaim is between borrowers, idle_only ones included (DESIGN kind 4): a
        # borrower's victim is named with it, or with the demotion that had already cost the
        # victim its In-Quota label (cycle.victim_reason); only a borrower reclaims a fair share
        if borrows:
            assert p.reason in ("fair_share", "min", "child_preemption"), p
        else:
            assert p.reason != "fair_share", p


PROPERTIES = (
    no_admission_is_evicted_next_cycle,
    no_one_is_preempted_twice_running,
    labels_hold_next_cycle,
    only_fair_share_makes_room_for_a_borrower,
)


@pytest.mark.parametrize("check", PROPERTIES, ids=[c.__name__ for c in PROPERTIES])
@STABLE
@given(snap=clusters())
def test_the_stability_properties_hold(check: Callable[[Snapshot], None], snap: Snapshot) -> None:
    check(snap)


# Hypothesis' examples are few (300 per property, the same every run) and miss defects that
# show once in thousands of clusters: the same generator drawn plainly at random covers
# thousands cheaply. The pinned seeds, beyond the plain range, each made a borrower's
# preemptor end its cycle Not in Quota on the code before ff5736b (8 of its first 150,000
# seeds; none fails since); 430012 did on 563567b (a parent's walk left its ancestor's row,
# which its own admission had pushed over, to the ancestor's own job: 1 of 450,000 seeds).
PINNED_SEEDS = (14407, 43071, 57439, 61531, 76806, 84751, 94881, 144523, 430012)
PLAIN_SEEDS = 2000  # per block


def hold_on(seeds: Iterable[int], size: Size = PLAIN) -> None:
    """Check every property on the plain random cluster of each seed, naming a failing one."""
    for seed in seeds:
        snap = random_cluster(seed, size)
        for check in PROPERTIES:
            try:
                check(snap)
            except AssertionError as failed:
                raise AssertionError(f"seed {seed}: {check.__doc__}") from failed


@pytest.mark.parametrize("block", range(2))
def test_the_stability_properties_hold_on_plain_random_clusters(block: int) -> None:
    seeds = range(block * PLAIN_SEEDS, (block + 1) * PLAIN_SEEDS)
    hold_on((*seeds, *(PINNED_SEEDS if block == 0 else ())))


# Trees of four to seven quotas, such as two sibling parents each over children of its own,
# which the clusters above (at most four quotas) never have. Seed 154881 needed five
# admission rounds in one cycle: with the four the cycle allowed before, a victim took its
# place back in the next cycle (1 of 300,000 seeds).
WIDE = Size(below=(3, 6))
WIDE_PINNED = (154881,)


def test_the_stability_properties_hold_on_wide_random_trees() -> None:
    hold_on((*range(PLAIN_SEEDS), *WIDE_PINNED), WIDE)


# Bigger clusters (up to 10 nodes, 30 workloads, 16 arrivals). In each pinned seed a
# borrower admitted by fair-share reclaim was shielded, as a preemptor, from displacement for
# the rest of its cycle, and in the next an In-Quota workload that had waited evicted it
# (53947, 119273: by priority; 69694, 165852: a victim of the first cycle, by reclaim; 4 of
# 240,000 seeds; 7396 of trees of 5 to 8 quotas, 1 of 100,000). In 32660, of trees of 3 to 6
# quotas, such a borrower turned In Quota in its cycle, and its victim was named as a fair
# share taken for a borrower (1 of 120,000).
BIG = Size(nodes=10, first=30, later=16)
BIG_SEEDS = 2000
BIG_PINNED = (53947, 69694, 119273, 165852)
BIGGER_TREES_PINNED = ((7396, (5, 8)), (32660, (3, 6)))


# Still bigger (16 nodes, 60 workloads, 30 arrivals): in 26186 a borrower reclaimed a fair
# share by labels that the same round's In-Quota admissions had changed (the root's own new
# service, by child-level preemption, turned the root's own jobs In Quota and a child's
# service Not): by the settled labels its victim's quota was below its share, and the victim
# took the place back in the next cycle (1 of 30,000 seeds).
HUGE = Size(below=(2, 5), nodes=16, first=60, later=30)
HUGE_SEEDS = 300
HUGE_PINNED = (26186,)


def test_the_stability_properties_hold_on_bigger_clusters() -> None:
    hold_on((*range(BIG_SEEDS), *BIG_PINNED), BIG)
    for seed, below in BIGGER_TREES_PINNED:
        hold_on((seed,), replace(BIG, below=below))
    hold_on((*range(HUGE_SEEDS), *HUGE_PINNED), HUGE)


# Three and four node pools, and services that the second cycle finds scaled up (a scaling
# rule fired: the new replicas start In Quota or wait, and may reclaim borrowed capacity) or
# down (replicas stopped). No seed has failed: 80,000 of three pools, 80,000 of four pools
# with 3 to 6 quotas under the root, and 20,000 each of the bigger shape with three and four.
SCALED = Size(pools=3, scale=True)
SCALED_BIG = Size(pools=4, scale=True, nodes=10, first=30, later=16)


def test_the_stability_properties_hold_with_more_pools_and_scaled_services() -> None:
    snaps = [random_cluster(seed, SCALED) for seed in range(50)]
    assert any(
        w.kind == "inference" and w.running and w.replicas > len(w.running)
        for snap in snaps
        for w in snap.workloads
    )
    assert {n.pool for snap in snaps for n in snap.nodes} == {"a100", "t4", "h100"}
    hold_on(range(PLAIN_SEEDS), SCALED)
    hold_on(range(500), SCALED_BIG)


def tree(b_min: float = 8, c_min: float = 8) -> list[QuotaBuilder]:
    """Root r with children b and c, like Quota 1 with Quota 1.1 and Quota 1.2."""
    return [
        quota("r").min(gpu=b_min + c_min).child_preemption(),
        quota("b").parent("r").min(gpu=b_min),
        quota("c").parent("r").min(gpu=c_min),
    ]


@dataclass
class PingPong:
    """A starting state and who may (not) preempt whom over three cycles."""

    node_count: int
    quotas: list[QuotaBuilder]
    workloads: list[WorkloadBuilder]
    first_victims: set[str]
    later_victims: set[str]


PING_PONG = {
    # The demo's 08:02 timeline: the In-Quota job reclaims from the idle_only job, which must
    # not take it back by priority (it would only run Not in Quota again).
    "idle_only_high_priority_never_preempts_the_in_quota_job_that_reclaimed": PingPong(
        2,
        tree(),
        [
            workload("job6").quota("b").gpus(8).priority(7).idle("idle_only").on("n1"),
            workload("job3").quota("b").gpus(8).priority(3).submitted(10),
            workload("c1").quota("c").gpus(8).on("n2"),
        ],
        {"job6"},
        set(),
    ),
    "idle_only_high_priority_never_preempts_a_running_in_quota_job": PingPong(
        2,
        tree(),
        [
            workload("job3").quota("b").gpus(8).priority(3).on("n1"),
            workload("job6").quota("b").gpus(8).priority(7).idle("idle_only").submitted(10),
            workload("c1").quota("c").gpus(8).on("n2"),
        ],
        set(),
        set(),
    ),
    # 16 GPUs in a quota of 8: it must borrow even if job3 left, so it evicts nobody.
    "acceptable_job_that_must_borrow_never_preempts_an_in_quota_job": PingPong(
        3,
        tree(8, 16),
        [
            workload("job3").quota("b").gpus(8).priority(3).on("n1"),
            workload("job6").quota("b").replicas(2).gpus(8).priority(7).idle("acceptable"),
            workload("c1").quota("c").gpus(8).on("n2"),
        ],
        set(),
        set(),
    ),
    "borrowed_acceptable_job_reclaimed_then_never_takes_it_back": PingPong(
        3,
        tree(8, 16),
        [
            workload("job6")
            .quota("b")
            .replicas(2)
            .gpus(8)
            .priority(7)
            .idle("acceptable")
            .on("n1", "n3"),
            workload("c1").quota("c").gpus(8).on("n2"),
            workload("c2").quota("c").gpus(8).submitted(10),
        ],
        {"job6"},
        set(),
    ),
    # Kind 3 done right: the victim's In-Quota share makes the preemptor In Quota; once.
    "higher_priority_in_quota_preemptor_takes_the_victims_share_once": PingPong(
        2,
        tree(),
        [
            workload("job3").quota("b").gpus(8).priority(3).on("n1"),
            workload("job6").quota("b").gpus(8).priority(7).submitted(10),
            workload("c1").quota("c").gpus(8).on("n2"),
        ],
        {"job3"},
        set(),
    ),
}


@pytest.mark.parametrize("case", list(PING_PONG.values()), ids=list(PING_PONG))
def test_preemption_does_not_ping_pong(case: PingPong) -> None:
    snap = snapshot(nodes(case.node_count), list(case.quotas), list(case.workloads))
    result = run_cycle(snap)
    assert {p.workload for p in result.preempted} == case.first_victims
    for p in result.preempted:
        assert result.classification[p.by], p
    for _ in range(3):
        snap = next_snapshot(snap, result)
        result = run_cycle(snap)
        assert {p.workload for p in result.preempted} == case.later_victims


def test_same_cycle_admissions_keep_their_labels_by_submission_order() -> None:
    # "zeta" is submitted first and admitted In Quota; "alpha" borrows c's idle GPUs. Ranked
    # by name alone, alpha would take zeta's In-Quota place once both have started.
    snap = snapshot(
        nodes(2),
        tree(),
        [
            workload("zeta").quota("b").gpus(8).idle("acceptable").submitted(1),
            workload("alpha").quota("b").gpus(8).idle("acceptable").submitted(2),
        ],
    )
    first, second = two_cycles(snap)
    assert {a.workload: a.in_quota for a in first.admitted} == {"zeta": True, "alpha": False}
    assert dict(first.classification) == {"zeta": True, "alpha": False}
    assert dict(second.classification) == {"zeta": True, "alpha": False}
    assert not second.preempted and not second.admitted


def test_a_smaller_min_keeps_a_low_priority_service_in_quota_ahead_of_high_priority_training() -> (
    None
):
    # Both ran In Quota in a quota of 16, scaled to 8: DESIGN's walk keeps non-preemptible
    # workloads before preemptible ones, whatever the priorities, and the label holds.
    snap = snapshot(
        nodes(2),
        [quota("q1").min(gpu=8)],
        [
            workload("svc").inference().gpus(8).priority(1).started(100).on("n1").labelled(True),
            workload("train")
            .gpus(8)
            .priority(9)
            .idle("acceptable")
            .started(50)
            .on("n2")
            .labelled(True),
        ],
    )
    first, second = two_cycles(snap)
    assert dict(first.classification) == {"svc": True, "train": False}
    assert [(d.workload, d.reason, d.quota) for d in first.demoted] == [("train", "min", "q1")]
    assert dict(second.classification) == {"svc": True, "train": False}
    assert not first.preempted and not second.preempted and not second.demoted


def test_a_child_pushed_out_of_quota_by_its_parent_is_taken_in_the_same_cycle() -> None:
    # The parent's own p1 starts In Quota on the idle node, p2 takes b1's node by child-level
    # preemption, and a1, whose In-Quota place the parent's own workloads now hold, runs Not
    # in Quota: both named with the kind that took them, and the next cycle changes nothing.
    first, second = two_cycles(pushed_out_then_reclaimed())
    assert {p.workload: (p.by, p.reason, p.quota) for p in first.preempted} == {
        "b1": ("p2", "child_preemption", "R")
    }
    assert {a.workload: a.in_quota for a in first.admitted} == {"p1": True, "p2": True}
    assert [(d.workload, d.by, d.reason) for d in first.demoted] == [
        ("a1", "p2", "child_preemption")
    ]
    assert not second.admitted and not second.preempted and not second.demoted
    assert dict(second.classification) == dict(first.classification)


def test_a_victim_takes_back_in_the_same_cycle_the_place_a_child_reclaimed() -> None:
    # h takes x's T4 GPUs by priority; c, of the child b, reclaims the borrower on the A100
    # node; x, retried, fits there In Quota only in c's place and takes it by child-level
    # preemption in this cycle, with c's victim, rather than in the next one: c never runs
    # for a cycle only to be evicted, and x is not preempted and admitted cycle after cycle.
    t4 = nodes(1, pool="t4", prefix="t", cpu=64_000)
    a100 = nodes(1, pool="a100", prefix="a", cpu=32_000)
    snap = snapshot(
        t4 + a100,
        [
            quota("R").min(gpu=8, pool="t4").min(gpu=8, pool="a100").child_preemption(),
            quota("b").parent("R").min(gpu=1, pool="a100"),
        ],
        [
            workload("x").quota("R").gpus(4).cpu(20_000).pools("t4", "a100").priority(1).on("t1"),
            workload("z").quota("R").gpus(4).pools("t4").priority(9).on("t1"),
            workload("borrower").quota("R").gpus(4).cpu(24_000).idle("idle_only").on("a1"),
            workload("h").quota("R").gpus(4).pools("t4").priority(5).submitted(10),
            workload("c").quota("b").gpus(1).cpu(16_000).submitted(20),
        ],
    )
    first, second = two_cycles(snap)
    assert {p.workload: (p.by, p.reason) for p in first.preempted} == {
        "x": ("h", "priority"),
        "borrower": ("x", "reclaim"),
    }
    assert {a.workload: a.placements[0].node for a in first.admitted} == {"h": "t1", "x": "a1"}
    assert not second.preempted and not second.admitted


def test_a_service_not_in_quota_in_one_pool_evicts_no_one_to_scale_up_in_another() -> None:
    # svc runs one replica on the T4 node, where R has no min: Not in Quota. Its second
    # replica would fit R's A100 min, but the label is the whole service's and the T4 replica
    # never fits In Quota: evicting the borrower on the A100 node would make room for a
    # service that still runs Not in Quota (the borrower was evicted for a borrower).
    snap = snapshot(
        nodes(1, gpus=2, pool="t4", prefix="t") + nodes(1, gpus=2, pool="a100", prefix="a"),
        [quota("R").min(gpu=2, pool="a100")],
        [
            workload("svc")
            .quota("R")
            .inference()
            .replicas(2)
            .gpus(1)
            .pools("a100", "t4")
            .on("t1")
            .labelled(False),
            workload("borrower").quota("R").gpus(2).pools("a100").idle("idle_only").on("a1"),
        ],
    )
    first, second = two_cycles(snap)
    assert not first.preempted and not first.admitted
    assert [(p.workload, p.reason) for p in first.pending] == [
        (
            "svc",
            "1 of 2 replicas is waiting: Quota R has 0 of 0 GPUs free in pool t4 (the job needs "
            "1 GPU with its replicas running Not in Quota), and inference services never borrow "
            "idle capacity",
        )
    ]
    assert not second.preempted and not second.admitted


@pytest.mark.parametrize("b_is_a_parent", [False, True], ids=["two_levels", "three_levels"])
def test_a_child_whose_room_a_retried_parent_job_takes_waits_and_hands_it_its_victim(
    b_is_a_parent: bool,
) -> None:
    # h takes x's T4 GPUs by priority; c, of the child b, reclaims the borrower on a1 (s1
    # lacks the CPU for it); x, retried, starts on s1 In Quota in R's room that c held: c,
    # which never borrows, must not run Not in Quota, and the borrower must not have been
    # evicted for a job that does. x takes c's victim and c waits, as in the next cycle.
    # With three levels b is a parent too (child-level preemption over b.leaf), and c is its
    # own admission: R's row is still x's doing, not c's.
    t4 = nodes(1, pool="t4", prefix="t", cpu=64_000)
    a100 = nodes(1, pool="a100", prefix="a", cpu=32_000)
    small = nodes(1, gpus=4, pool="a100", prefix="s", cpu=8_000)
    below = [quota("b.leaf").parent("b")] if b_is_a_parent else []
    snap = snapshot(
        t4 + a100 + small,
        [
            quota("R").min(gpu=8, pool="t4").min(gpu=4, pool="a100").child_preemption(),
            quota("b").parent("R").min(gpu=4, pool="a100").child_preemption(b_is_a_parent),
            *below,
        ],
        [
            workload("x").quota("R").gpus(4).cpu(4_000).pools("t4", "a100").priority(1).on("t1"),
            workload("z").quota("R").gpus(4).pools("t4").priority(9).on("t1"),
            workload("borrower")
            .quota("R")
            .gpus(8)
            .cpu(8_000)
            .pools("a100")
            .idle("idle_only")
            .on("a1"),
            workload("h").quota("R").gpus(4).pools("t4").priority(5).submitted(10),
            workload("c").quota("b").gpus(4).cpu(16_000).pools("a100").submitted(20),
        ],
    )
    first, second = two_cycles(snap)
    assert {p.workload: (p.by, p.reason) for p in first.preempted} == {
        "x": ("h", "priority"),
        "borrower": ("x", "reclaim"),
    }
    assert {a.workload: (a.in_quota, a.placements[0].node) for a in first.admitted} == {
        "h": (True, "t1"),
        "x": (True, "s1"),
    }
    assert "c" not in first.classification and not first.demoted
    assert not second.preempted and not second.admitted and not second.demoted


def test_a_parents_own_job_takes_its_childs_room_in_an_ancestors_row_too() -> None:
    # R's own r takes w's place by priority. P's own service s then fits In Quota by counting
    # its child k1's In-Quota place as room in P's row and in R's (child-level preemption):
    # k1 loses its label, not r, which must not run Not in Quota with w evicted for it.
    snap = snapshot(
        nodes(2, gpus=4),
        [
            quota("R").min(gpu=4),
            quota("P").parent("R").min(gpu=4).child_preemption(),
            quota("K").parent("P").min(gpu=2),
        ],
        [
            workload("k1").quota("K").inference().gpus(1).on("n1"),
            workload("w").quota("R").gpus(3).priority(1).on("n1"),
            workload("s").quota("P").inference().gpus(3).priority(9).submitted(10),
            workload("r").quota("R").gpus(1).priority(5).submitted(20),
        ],
    )
    first, second = two_cycles(snap)
    assert {p.workload: (p.by, p.reason) for p in first.preempted} == {"w": ("r", "priority")}
    assert {a.workload: a.in_quota for a in first.admitted} == {"r": True, "s": True}
    assert [(d.workload, d.by, d.reason) for d in first.demoted] == [
        ("k1", "s", "child_preemption")
    ]
    assert not second.preempted and not second.admitted and not second.demoted


def test_sibling_parents_each_take_their_own_childs_room_in_their_common_parents_row() -> None:
    # P1's and P2's own services each count a child's In-Quota place as room, in their own
    # rows and in R's, where the two together go over R's min. P2's own row is over too, so
    # P2's child k2 loses its label; k1 keeps its, and so do both services (P1's walk, which
    # runs first while k2 still counts in R's row, must not leave s1 Not in Quota).
    snap = snapshot(
        nodes(3, gpus=4),
        [
            quota("R").min(gpu=8),
            quota("P1").parent("R").min(gpu=4).child_preemption(),
            quota("K1").parent("P1").min(gpu=4),
            quota("P2").parent("R").min(gpu=4).child_preemption(),
            quota("K2").parent("P2").min(gpu=4),
        ],
        [
            workload("k1").quota("K1").inference().gpus(1).on("n1"),
            workload("k2").quota("K2").inference().gpus(3).on("n1"),
            workload("s1").quota("P1").inference().gpus(3).submitted(10),
            workload("s2").quota("P2").inference().gpus(3).submitted(20),
        ],
    )
    first, second = two_cycles(snap)
    assert not first.preempted
    assert {a.workload: a.in_quota for a in first.admitted} == {"s1": True, "s2": True}
    assert [(d.workload, d.by) for d in first.demoted] == [("k2", "s2")]
    assert first.classification["k1"]
    assert not second.preempted and not second.admitted and not second.demoted


def test_a_higher_priority_job_takes_the_place_of_a_borrower_that_reclaimed_a_fair_share() -> None:
    # p2 needs w12's room in Q (priority) and n1's devices, held by O's borrowers (reclaim),
    # two kinds in one search: it waits. p7, of Q too, borrows by fair share in w0's place.
    # Retried, p2 takes w12's room and p7's place by priority in the same cycle, and w0 is
    # p2's victim, reclaimed (it borrowed): p7 never runs only to be evicted in the next.
    snap = snapshot(
        nodes(1, gpus=4, cpu=32_000) + nodes(1, gpus=4, prefix="s", cpu=8_000),
        [
            quota("R").min(gpu=8),
            quota("Q").parent("R").min(gpu=4),
            quota("L").parent("R").min(gpu=4),
            quota("O").parent("R"),
        ],
        [
            workload("w12").quota("Q").gpus(4).cpu(1_000).priority(1).on("s1"),
            workload("w0").quota("O").gpus(2).cpu(1_000).idle("acceptable").on("n1"),
            workload("w1").quota("O").gpus(2).cpu(1_000).idle("acceptable").on("n1"),
            workload("p2").quota("Q").gpus(2).cpu(16_000).priority(9).submitted(10),
            workload("p7")
            .quota("Q")
            .gpus(2)
            .cpu(1_000)
            .priority(1)
            .idle("acceptable")
            .submitted(20),
        ],
    )
    first, second = two_cycles(snap)
    assert {p.workload: (p.by, p.reason, p.quota) for p in first.preempted} == {
        "w12": ("p2", "priority", "Q"),
        "w0": ("p2", "reclaim", "Q"),
    }
    assert {a.workload: (a.in_quota, a.placements[0].node) for a in first.admitted} == {
        "p2": (True, "n1"),
        "p7": (True, "s1"),
        "w0": (False, "s1"),
    }
    assert not second.preempted and not second.admitted and not second.demoted
