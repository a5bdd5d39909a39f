"""Table-driven scenario tests of the cycle: classification, admission, preemption."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import CycleResult, Snapshot

from .builders import nodes, quota, snapshot, workload


def mission(child_preemption: bool) -> Snapshot:
    """Quota 1 = 16 x 8 A100; team B fills 48 + 40 borrowed in 1.1; team C runs 40 in 1.2."""
    ws = []
    for i in range(11):  # 6 in quota, the 5 newest borrowed
        ws.append(
            workload(f"b{i}")
            .quota("1.1")
            .gpus(8)
            .idle("acceptable")
            .priority(5)
            .started(100 + i)
            .on(f"n{i + 1}")
        )
    for i, prio in enumerate([2, 3, 4, 6, 7]):
        ws.append(
            workload(f"c{i}").quota("1.2").gpus(8).priority(prio).started(50 + i).on(f"n{12 + i}")
        )
    ws.append(workload("svc").quota("1").inference().replicas(8).gpus(8).priority(5))
    return snapshot(
        nodes(16),
        [
            quota("1").min(gpu=128).child_preemption(child_preemption),
            quota("1.1").parent("1").min(gpu=48),
            quota("1.2").parent("1").min(gpu=80),
        ],
        ws,
    )


def idle_policies() -> Snapshot:
    """q1 has 8 of 16 free; qb has nothing of its own but tree-idle capacity to lend."""
    return snapshot(
        nodes(4),
        [
            quota("r").min(gpu=32),
            quota("q1").parent("r").min(gpu=16),
            quota("qb").parent("r").min(gpu=0),
            quota("lender").parent("r").min(gpu=16),
        ],
        [
            workload("fill").quota("q1").gpus(8).on("n1"),
            workload("acc-in").quota("q1").gpus(8).idle("acceptable").submitted(1),
            workload("acc-out").quota("qb").gpus(8).idle("acceptable").submitted(2),
            workload("only").quota("q1").gpus(8).idle("idle_only").submitted(3),
        ],
    )


def weighted_borrowers() -> Snapshot:
    """40 idle GPUs, borrowers with weights 3:1 each asking for all of it."""
    ws = [
        workload("a-own").quota("A").gpus(8).on("n1"),
        workload("b-own").quota("B").gpus(8).on("n2"),
    ]
    for i in range(20):
        ws.append(workload(f"a{i:02}").quota("A").gpus(2).idle("idle_only").submitted(i))
        ws.append(workload(f"b{i:02}").quota("B").gpus(2).idle("idle_only").submitted(i))
    return snapshot(
        nodes(7),
        [
            quota("r").min(gpu=56),
            quota("A").parent("r").min(gpu=8).weight(3),
            quota("B").parent("r").min(gpu=8).weight(1),
            quota("L").parent("r").min(gpu=40),
        ],
        ws,
    )


def priority_case(incoming: int) -> Snapshot:
    """n1 holds one 8-GPU p2 job; n2 holds a p1 and a p3 4-GPU job; quota q1 is full."""
    return snapshot(
        nodes(2),
        [quota("q1").min(gpu=16)],
        [
            workload("big-p2").gpus(8).priority(2).on("n1"),
            workload("half-p1").gpus(4).priority(1).on("n2"),
            workload("half-p3").gpus(4).priority(3).on("n2"),
            workload("new").gpus(8).priority(incoming),
        ],
    )


def scattered_free() -> Snapshot:
    """Four nodes with 2 free GPUs each; borrowers hold the rest; an entitled 8-GPU job waits."""
    ws = []
    for n in range(1, 5):
        for j in range(3):
            ws.append(
                workload(f"bor-n{n}-{j}")
                .quota("B")
                .gpus(2)
                .idle("idle_only")
                .started(10 * n + j)
                .on(f"n{n}")
            )
    ws.append(workload("entitled").quota("A").gpus(8))
    return snapshot(
        nodes(4),
        [
            quota("r").min(gpu=32),
            quota("A").parent("r").min(gpu=8),
            quota("B").parent("r").min(gpu=0),
        ],
        ws,
    )


def sharing(first: float, second: float) -> Snapshot:
    """One node with one GPU; two fractional requests."""
    return snapshot(
        nodes(1, gpus=1),
        [quota("q1").min(gpu=2)],
        [workload("x").gpus(first).submitted(1), workload("y").gpus(second).submitted(2)],
    )


def lending(lend: bool, qmax: float | None, ask: float) -> Snapshot:
    """Quota L (min 8) is unused; B is full and asks to borrow."""
    b = quota("B").parent("r").min(gpu=8)
    if qmax is not None:
        b = b.max(gpu=qmax)
    return snapshot(
        nodes(2),
        [quota("r").min(gpu=16), b, quota("L").parent("r").min(gpu=8).lend_idle(lend)],
        [
            workload("own").quota("B").gpus(8).on("n1"),
            workload("borrow").quota("B").gpus(ask).idle("idle_only"),
        ],
    )


def three_levels() -> Snapshot:
    """R(32) -> D(24) -> T1(16), T2(8); R -> E(8). T1 borrows E's idle; E wants it back."""
    return snapshot(
        nodes(4),
        [
            quota("R").min(gpu=32),
            quota("D").parent("R").min(gpu=24),
            quota("T1").parent("D").min(gpu=16),
            quota("T2").parent("D").min(gpu=8),
            quota("E").parent("R").min(gpu=8),
        ],
        [
            workload("t1-a").quota("T1").gpus(8).on("n1").started(1),
            workload("t1-b").quota("T1").gpus(8).on("n2").started(2),
            workload("t1-c").quota("T1").gpus(8).idle("acceptable").on("n3").started(3),
            workload("t2-a").quota("T2").gpus(8).on("n4").started(4),
            workload("e-job").quota("E").gpus(8).submitted(5),
        ],
    )


def parent_usage_counts() -> Snapshot:
    """D's own p9 job uses 8 of D's 24, so T2's job is Not in Quota despite T2's room."""
    return snapshot(
        nodes(4),
        [
            quota("R").min(gpu=32),
            quota("D").parent("R").min(gpu=24),
            quota("T1").parent("D").min(gpu=16),
            quota("T2").parent("D").min(gpu=8),
        ],
        [
            workload("d-own").quota("D").gpus(8).priority(9).on("n1"),
            workload("t1-a").quota("T1").gpus(8).on("n2").started(1),
            workload("t1-b").quota("T1").gpus(8).on("n3").started(2),
            workload("t2-a").quota("T2").gpus(8).idle("acceptable").on("n4").started(3),
        ],
    )


def odd_gpus() -> Snapshot:
    """n1 runs a 4-GPU job (4 free), n2 a 1-GPU job (7 free); a notebook and two 4-GPU jobs wait.

    Best fit would put the notebook on n1 (3 + 7 free) and leave room for one 4-GPU job only;
    taking the odd GPU of n2 keeps n1's 4 free GPUs whole for one and n2's 4-block for the other.
    """
    return snapshot(
        nodes(2),
        [quota("q1").min(gpu=16)],
        [
            workload("half").gpus(4).on("n1"),
            workload("one").gpus(1).on("n2"),
            workload("notebook").interactive().gpus(1).submitted(1),
            workload("four-a").gpus(4).submitted(2),
            workload("four-b").gpus(4).submitted(3),
        ],
    )


def pushed_out_then_reclaimed() -> Snapshot:
    """R (child preemption, min 16) over A and B (8 each) on 24 GPUs: a1 and b1 fill R's min
    In Quota; R's own p1 and p2 (8 each) wait.

    Submitted to the parent, they rank ahead of its children: p1 starts In Quota on the idle
    n3, p2 takes b1's node by child-level preemption (b1 ranks last), and R's 16 GPUs are then
    all its own, so a1 keeps running Not in Quota. Before the rule of DESIGN §1 this scenario
    was a priority-2 job pushing a priority-1 incumbent out of quota by outranking it, which
    no longer happens: only a parent's own workloads (or a smaller min) do that.
    """
    return snapshot(
        nodes(3),
        [
            quota("R").min(gpu=16).child_preemption(),
            quota("A").parent("R").min(gpu=8),
            quota("B").parent("R").min(gpu=8),
        ],
        [
            workload("a1").quota("A").gpus(8).priority(5).on("n1"),
            workload("b1").quota("B").gpus(8).priority(1).on("n2"),
            workload("p1").quota("R").gpus(8).priority(5).submitted(200),
            workload("p2").quota("R").gpus(8).priority(4).submitted(201),
        ],
    )


@dataclass
class Case:
    """A scenario and what the cycle must decide."""

    build: Callable[[], Snapshot]
    admitted: dict[str, bool] = field(default_factory=dict)  # name -> in_quota
    preempted: dict[str, tuple[str, str]] = field(default_factory=dict)  # victim -> (by, reason)
    pending: set[str] = field(default_factory=set)  # the queue's and victims left waiting
    classification: dict[str, bool] = field(default_factory=dict)  # subset to check


CASES = {
    "mission_reclaims_borrowed_then_preempts_children_lowest_priority_first": Case(
        lambda: mission(True),
        admitted={"svc": True},
        preempted={
            **{f"b{i}": ("svc", "reclaim") for i in range(6, 11)},
            **{f"c{i}": ("svc", "child_preemption") for i in range(3)},
        },
        pending={f"b{i}" for i in range(6, 11)} | {f"c{i}" for i in range(3)},
        classification={"b0": True, "b5": True, "c3": True, "c4": True},
    ),
    "mission_without_child_preemption_takes_only_borrowed_capacity": Case(
        lambda: mission(False),
        admitted={"svc": True},
        preempted={f"b{i}": ("svc", "reclaim") for i in range(6, 11)},
        pending={"svc"} | {f"b{i}" for i in range(6, 11)},
        classification={"c0": True, "b5": True},
    ),
    "acceptable_runs_in_quota_with_room_else_borrows_and_idle_only_never_in_quota": Case(
        idle_policies,
        admitted={"acc-in": True, "acc-out": False, "only": False},
        classification={"fill": True},
    ),
    "equal_priority_evicts_nothing": Case(
        lambda: priority_case(2),
        pending={"new"},
    ),
    "higher_priority_evicts_the_minimal_lowest_priority_set": Case(
        lambda: priority_case(9),
        admitted={"new": True},
        preempted={"big-p2": ("new", "priority")},
        pending={"big-p2"},
    ),
    "half_and_half_share_one_device": Case(
        lambda: sharing(0.5, 0.5),
        admitted={"x": True, "y": True},
    ),
    "point_six_and_half_do_not_share_a_device": Case(
        lambda: sharing(0.6, 0.5),
        admitted={"x": True},
        pending={"y"},
    ),
    "lend_idle_false_lends_nothing": Case(
        lambda: lending(False, None, 8),
        pending={"borrow"},
    ),
    "lend_idle_true_lends_unused_min": Case(
        lambda: lending(True, None, 8),
        admitted={"borrow": False},
    ),
    "max_caps_borrowing": Case(
        lambda: lending(True, 12, 8),
        pending={"borrow"},
    ),
    "max_allows_borrowing_below_it": Case(
        lambda: lending(True, 12, 4),
        admitted={"borrow": False},
    ),
    "three_level_tree_borrows_up_and_reclaims_down": Case(
        three_levels,
        admitted={"e-job": True},
        preempted={"t1-c": ("e-job", "reclaim")},
        pending={"t1-c"},
        classification={"t1-a": True, "t1-b": True, "t2-a": True},
    ),
    "one_gpu_takes_an_odd_gpu_and_keeps_four_gpu_blocks_whole": Case(
        odd_gpus,
        admitted={"notebook": True, "four-a": True, "four-b": True},
    ),
    "parent_own_workloads_take_their_children_s_place_by_child_level_preemption": Case(
        pushed_out_then_reclaimed,
        admitted={"p1": True, "p2": True},
        preempted={"b1": ("p2", "child_preemption")},
        pending={"b1"},
        classification={"a1": False},
    ),
    "parent_own_usage_counts_against_its_subtree": Case(
        parent_usage_counts,
        classification={"d-own": True, "t1-a": True, "t1-b": True, "t2-a": False},
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_cycle_decides(case: Case) -> None:
    result = run_cycle(case.build())
    assert {a.workload: a.in_quota for a in result.admitted} == case.admitted
    assert {p.workload: (p.by, p.reason) for p in result.preempted} == case.preempted
    assert {p.workload for p in result.pending} == case.pending
    for name, in_quota in case.classification.items():
        assert result.classification[name] is in_quota, name
    for p in result.pending:
        assert p.reason.strip() and "\n" not in p.reason


def _run(build: Callable[[], Snapshot]) -> CycleResult:
    return run_cycle(build())


def test_mission_service_gets_every_replica_on_whole_nodes() -> None:
    result = _run(lambda: mission(True))
    (adm,) = result.admitted
    assert len(adm.placements) == 8
    assert all(len(p.devices) == 8 for p in adm.placements)
    assert len({p.node for p in adm.placements}) == 8
    # only its victims wait, each saying why
    assert {p.workload for p in result.pending} == {w.workload for w in result.preempted}
    assert all(p.reason for p in result.pending)


def test_mission_without_child_preemption_explains_the_waiting_replicas() -> None:
    result = _run(lambda: mission(False))
    (adm,) = result.admitted
    assert len(adm.placements) == 5
    (pend,) = [p for p in result.pending if p.workload == "svc"]
    assert pend.reason.startswith("3 of 8 replicas are waiting")
    assert "Quota 1 has 0 of 128 GPUs free" in pend.reason


def test_weighted_borrowers_split_idle_capacity_three_to_one() -> None:
    result = _run(weighted_borrowers)
    got = {"A": 0, "B": 0}
    for a in result.admitted:
        got[a.workload[0].upper()] += 2 * len(a.placements)
    assert got == {"A": 30, "B": 10}
    assert not result.preempted


def test_fair_share_reclaim_takes_from_above_share_without_inverting() -> None:
    first = _run(weighted_borrowers)
    base = weighted_borrowers()
    running = {a.workload: a.placements for a in first.admitted}
    ws = []
    for w in base.workloads:
        if w.name in running:
            ws.append(replace(w, running=running[w.name], started_at=500))
        elif w.running:
            ws.append(w)
    ws.append(workload("c-own").quota("C").gpus(8).on("n8").build())
    for i in range(4):
        ws.append(workload(f"c{i}").quota("C").gpus(2).idle("idle_only").submitted(600 + i).build())
    snap = snapshot(
        nodes(8),
        [
            quota("r").min(gpu=64),
            quota("A").parent("r").min(gpu=8).weight(3),
            quota("B").parent("r").min(gpu=8).weight(1),
            quota("C").parent("r").min(gpu=8),
            quota("L").parent("r").min(gpu=40),
        ],
        ws,
    )
    result = run_cycle(snap)
    assert result.preempted
    assert all(p.reason == "fair_share" and p.by.startswith("c") for p in result.preempted)
    lost = {"A": 0, "B": 0}
    for p in result.preempted:
        lost[p.workload[0].upper()] += 2
    c_gain = 2 * sum(len(a.placements) for a in result.admitted)
    assert c_gain == sum(lost.values()) > 0
    a_after, b_after = 30 - lost["A"], 10 - lost["B"]
    assert c_gain / 1 <= a_after / 3 and c_gain / 1 <= b_after / 1


def test_placement_aware_reclaim_frees_one_node_not_scattered_gpus() -> None:
    result = _run(scattered_free)
    by_name = {a.workload: a for a in result.admitted}
    adm = by_name.pop("entitled")
    assert adm.in_quota
    victims = {p.workload for p in result.preempted}
    assert len(victims) == 3
    assert len({v.split("-")[1] for v in victims}) == 1
    assert adm.placements[0].node == f"n{next(iter(victims)).split('-')[1][1:]}"
    assert all(p.reason == "reclaim" for p in result.preempted)
    # The victims are retried in the same cycle: they restart on the 2 GPUs left on each
    # of the other nodes instead of waiting a cycle for them.
    assert set(by_name) == victims
    assert {a.placements[0].node for a in by_name.values()} == {"n1", "n2", "n3", "n4"} - {
        adm.placements[0].node
    }
    assert not any(a.in_quota for a in by_name.values())


def test_half_gpu_requests_land_on_the_same_device() -> None:
    result = _run(lambda: sharing(0.5, 0.5))
    devices = {a.placements[0].devices for a in result.admitted}
    assert devices == {(0,)}


def test_fractional_pending_reason_names_the_share() -> None:
    result = _run(lambda: sharing(0.6, 0.5))
    assert "a GPU with 0.5 free" in result.pending[0].reason


def test_pending_reason_names_quota_numbers_and_borrowing_off() -> None:
    snap = snapshot(
        nodes(1),
        [quota("1").min(gpu=8), quota("1.1").parent("1").min(gpu=8)],
        [workload("run").quota("1.1").gpus(8).on("n1"), workload("wait").quota("1.1").gpus(2)],
    )
    (pend,) = run_cycle(snap).pending
    assert pend.reason.startswith("Quota 1.1 has 0 of 8 GPUs free")
    assert pend.reason.endswith("idle borrowing is off for this job")


def test_pending_reason_for_no_node_with_enough_gpus() -> None:
    snap = snapshot(
        nodes(2, gpus=4, pool="T4"),
        [quota("q").min(gpu=8, pool="T4")],
        [workload("big").quota("q").gpus(8).pools("T4")],
    )
    (pend,) = run_cycle(snap).pending
    assert pend.reason == "no node in pool T4 has 8 free GPUs"


@pytest.mark.parametrize(
    ("cpu", "memory", "fit", "each"),
    [
        (0, 0, 2, "4 GPUs"),
        (60_000, 0, 1, "4 GPUs and 60000 millicores"),
        (60_000, 1024, 1, "4 GPUs, 60000 millicores and 1024 MiB of memory"),
    ],
)
def test_pending_reason_of_a_gang_counts_the_replicas_that_fit(
    cpu: int, memory: int, fit: int, each: str
) -> None:
    # n1 and n2 have 2 of their 8 GPUs free, n3 all 8 and its 96 cores: no node lacks room for
    # one replica of 4 GPUs, but the three do not fit together.
    snap = snapshot(
        nodes(3),
        [quota("q").min(gpu=24)],
        [
            workload("r1").quota("q").gpus(6).on("n1"),
            workload("r2").quota("q").gpus(6).on("n2"),
            workload("gang").quota("q").gpus(4).cpu(cpu).memory(memory).replicas(3),
        ],
    )
    result = run_cycle(snap)
    (pend,) = result.pending
    assert pend.reason == (
        f"the free room of pool a100 takes only {fit} of the 3 replicas ({each} each), "
        "and they start together or not at all"
    )
    assert not result.admitted


def test_pending_reason_of_a_gang_names_the_pool_short_of_room_not_one_the_quota_shuts() -> None:
    # h100 has room for the whole gang, but q has no min there and the job does not borrow:
    # the room that is short is a100's
    snap = snapshot(
        nodes(3) + nodes(2, pool="h100", prefix="h"),
        [quota("q").min(gpu=24)],
        [
            workload("r1").quota("q").gpus(6).on("n1"),
            workload("r2").quota("q").gpus(6).on("n2"),
            workload("gang").quota("q").gpus(4).replicas(3).pools("a100", "h100").idle("none"),
        ],
    )
    (pend,) = run_cycle(snap).pending
    assert pend.reason.startswith("the free room of pool a100 takes only 2 of the 3 replicas")


@pytest.mark.parametrize(
    ("gpus", "cpu", "memory", "reason"),
    [
        (2, 90_000, 0, "2 free GPUs together with 90000 free millicores"),
        (2, 0, 800_000, "2 free GPUs together with 800000 MiB of memory"),
        (2, 90_000, 1, "2 free GPUs together with 90000 free millicores and 1 MiB of memory"),
        (0, 90_000, 0, "90000 free millicores"),
    ],
)
def test_pending_reason_names_only_the_cores_and_memory_asked_for(
    gpus: int, cpu: int, memory: int, reason: str
) -> None:
    # n1 has 4 of its 8 GPUs and 16 of its 96 cores free.
    snap = snapshot(
        nodes(1),
        [quota("q").min(gpu=8)],
        [
            workload("run").quota("q").gpus(4).cpu(80_000).on("n1"),
            workload("wait").quota("q").gpus(gpus).cpu(cpu).memory(memory),
        ],
    )
    (pend,) = run_cycle(snap).pending
    assert pend.reason == f"no node in pool a100 has {reason}"


def test_gang_training_starts_all_replicas_or_none() -> None:
    snap = snapshot(
        nodes(2),
        [quota("q1").min(gpu=16)],
        [workload("x").gpus(8).on("n1"), workload("gang").gpus(8).replicas(2)],
    )
    result = run_cycle(snap)
    assert not result.admitted
    assert [p.workload for p in result.pending] == ["gang"]


def test_inference_never_borrows_and_is_never_a_victim() -> None:
    snap = snapshot(
        nodes(2),
        [
            quota("r").min(gpu=16),
            quota("a").parent("r").min(gpu=8),
            quota("b").parent("r").min(gpu=8),
        ],
        [
            workload("svc").quota("a").inference().replicas(2).gpus(8),
            workload("inf-b").quota("b").inference().gpus(8).priority(1).on("n2"),
            workload("hi").quota("b").gpus(8).priority(9),
        ],
    )
    result = run_cycle(snap)
    assert [(a.workload, len(a.placements)) for a in result.admitted] == [("svc", 1)]
    assert not result.preempted
    assert {p.workload for p in result.pending} == {"svc", "hi"}


def test_fifo_queue_ignores_priority_within_the_quota() -> None:
    snap = snapshot(
        nodes(1),
        [quota("q1").min(gpu=8).fifo()],
        [
            # a service: priority preemption never evicts it, so only the queue order decides
            workload("old").inference().gpus(8).priority(1).submitted(1),
            workload("new").gpus(8).priority(9).submitted(2),
        ],
    )
    result = run_cycle(snap)
    assert [a.workload for a in result.admitted] == ["old"]


def test_borrowed_job_becomes_in_quota_when_its_quota_frees_up() -> None:
    snap = snapshot(
        nodes(2),
        [
            quota("r").min(gpu=16),
            quota("q").parent("r").min(gpu=8),
            quota("o").parent("r").min(gpu=8),
        ],
        [workload("late").quota("q").gpus(8).idle("acceptable").on("n2").started(9)],
    )
    assert run_cycle(snap).classification == {"late": True}


def test_pool_scope_borrows_across_root_quotas() -> None:
    qs = [quota("r1").min(gpu=8), quota("r2").min(gpu=8)]
    ws = [
        workload("own").quota("r1").gpus(8).on("n1"),
        workload("more").quota("r1").gpus(8).idle("idle_only"),
    ]
    tree = run_cycle(snapshot(nodes(2), qs, ws, idle_scope="tree"))
    pool = run_cycle(snapshot(nodes(2), qs, ws, idle_scope="pool"))
    assert [p.workload for p in tree.pending] == ["more"]
    assert [a.workload for a in pool.admitted] == ["more"]


def test_work_lost_counts_gpu_seconds_since_checkpoint() -> None:
    result = _run(lambda: mission(True))
    lost = {p.workload: p.work_lost_gpu_seconds for p in result.preempted}
    assert lost["c0"] == 8 * (1000 - 50)


def cheap_borrowers() -> Snapshot:
    """The owner wants 8 GPUs back from a borrower's 8-GPU job on n1, while 80 newer borrowed
    half-GPU jobs filling n2-n6 rank before it as cheaper victims."""
    ws = [workload("big").quota("borrower").gpus(8).idle("acceptable").started(10).on("n1")]
    for i in range(80):  # freeing a whole node of these takes 16 victims
        node = f"n{i // 16 + 2}"
        ws.append(
            workload(f"half{i}")
            .quota("borrower")
            .gpus(0.5)
            .idle("acceptable")
            .started(500 + i)
            .on(node)
        )
    ws.append(workload("owner").quota("owner").gpus(8).submitted(900))
    return snapshot(
        nodes(6),
        [quota("owner").min(gpu=48), quota("borrower")],
        ws,
    )


def test_reclaim_looks_past_cheaper_victims_that_free_no_whole_gpu() -> None:
    # The cheap ones must not fill the bounded victim window: the owner takes n1 back by
    # evicting one job, not 16 half-GPU ones (or none, failing, with a few more of them).
    result = _run(cheap_borrowers)
    adm = {a.workload: a for a in result.admitted}
    assert adm["owner"].in_quota
    assert adm["owner"].placements[0].node == "n1"
    assert [(p.workload, p.reason) for p in result.preempted] == [("big", "reclaim")]


def test_reclaim_frees_cpu_held_by_cpu_only_borrowers_for_a_gpu_job() -> None:
    # n1's GPUs are free but its CPU is all borrowed by CPU-only jobs: the owner's GPU job
    # takes the CPU back rather than waiting, though those victims free no GPU.
    ws = [
        workload(f"cpu{i}")
        .quota("borrower")
        .gpus(0)
        .cpu(8_000)
        .idle("acceptable")
        .started(100 + i)
        .on("n1")
        for i in range(12)
    ]
    ws.append(workload("owner").quota("owner").gpus(8).cpu(8_000).submitted(900))
    result = _run(
        lambda: snapshot(
            nodes(1), [quota("owner").min(gpu=8, cpu=88_000), quota("borrower").min(cpu=8_000)], ws
        )
    )
    adm = {a.workload: a for a in result.admitted}
    assert adm["owner"].in_quota
    assert [(p.workload, p.reason) for p in result.preempted] == [("cpu11", "reclaim")]


def test_a_service_running_not_in_quota_starts_no_borrowed_replica() -> None:
    # After its quota was scaled down, service b runs 2 replicas Not in Quota; asked for 3, it
    # must not start a third, borrowed, though 1 GPU of the quota is free beside a's 2.
    snap = snapshot(
        nodes(1),
        [quota("q").min(gpu=3)],
        [
            workload("a").quota("q").inference().gpus(1).on("n1", "n1").submitted(10),
            workload("b").quota("q").inference().gpus(1).on("n1", "n1").replicas(3).submitted(20),
        ],
    )
    result = run_cycle(snap)
    assert result.classification == {"a": True, "b": False}
    assert not result.admitted and not result.preempted
    [pending] = result.pending
    assert pending.workload == "b"
    assert pending.reason == (
        "1 of 3 replicas is waiting: Quota q has 1 of 3 GPUs free in pool a100 (the job needs "
        "3 GPUs with its replicas running Not in Quota), and inference services never borrow idle "
        "capacity"
    )
