"""FGD-style fragmentation measure and the placement that descends it."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import pytest

from jobs.scheduling.fragmentation import (
    FragmentationScorer,
    Shape,
    _exact,
    _key,
    _order,
    _Table,
    fragmentation,
    popular_shapes,
    shape_fragment,
    split_gpu,
    target_workload,
)
from jobs.scheduling.snapshot import State
from jobs.scheduling.types import MILLI, Node, Snapshot

BIG = 10**9


def state_of(*nodes: Node) -> State:
    return State(Snapshot(0, tuple(nodes), (), (), "tree"))


def test_split_gpu() -> None:
    assert split_gpu(0) == (0, 0)
    assert split_gpu(470) == (1, 470)
    assert split_gpu(1000) == (1, 1000)
    assert split_gpu(8000) == (8, 1000)


def test_shape_fragment_by_hand() -> None:
    dev = [1000, 300]
    # a 500 share fits on the whole device; the 300 left on the other is a fragment
    assert shape_fragment(dev, 10_000, BIG, "T4", Shape(1.0, 1, 500, 0, 0)) == 300
    # a 200 share fits on both: nothing is a fragment
    assert shape_fragment(dev, 10_000, BIG, "T4", Shape(1.0, 1, 200, 0, 0)) == 0
    # two whole GPUs do not fit: all 1300 free milli-GPU are fragment
    assert shape_fragment(dev, 10_000, BIG, "T4", Shape(1.0, 2, 1000, 0, 0)) == 1300
    # one whole GPU fits; the partial device is a fragment
    assert shape_fragment(dev, 10_000, BIG, "T4", Shape(1.0, 1, 1000, 0, 0)) == 300
    # not enough CPU or memory strands every free GPU
    assert shape_fragment(dev, 10_000, BIG, "T4", Shape(1.0, 1, 200, 12_000, 0)) == 1300
    assert shape_fragment(dev, 10_000, 100, "T4", Shape(1.0, 1, 200, 0, 200)) == 1300
    # a task that does not accept this GPU model sees everything as fragment
    shape = Shape(1.0, 1, 200, 0, 0, frozenset({"A100"}))
    assert shape_fragment(dev, 10_000, BIG, "T4", shape) == 1300
    assert shape_fragment(dev, 10_000, BIG, "A100", shape) == 0


def test_fragmentation_is_the_expectation_over_shapes() -> None:
    shapes = [Shape(0.5, 1, 500, 0, 0), Shape(0.25, 2, 1000, 0, 0), Shape(0.25, 1, 100, 0, 0)]
    # 0.5 * 300 + 0.25 * 1300 + 0.25 * 0
    assert fragmentation([1000, 300], 10_000, BIG, "T4", shapes) == pytest.approx(475.0)
    assert fragmentation([0, 0], 10_000, BIG, "T4", shapes) == 0.0
    assert fragmentation([1000, 1000], 10_000, BIG, "T4", shapes) == 0.0


def test_target_workload_counts_gpu_shapes_only() -> None:
    pods = [(500, 4000, 100, ()), (500, 4000, 100, ()), (2000, 8000, 200, ("V100",)), (0, 1, 1, ())]
    # pods per device: the two shares weigh 2, the 2-GPU pod 1/2
    shapes = target_workload(pods)
    assert shapes == [
        Shape(0.8, 1, 500, 4000, 100),
        Shape(0.2, 2, 1000, 8000, 200, frozenset({"V100"})),
    ]
    assert target_workload(pods, memory=False)[0] == Shape(0.8, 1, 500, 4000, 0)
    assert target_workload([(0, 1, 1, ())]) == []


def test_a_shape_weighs_its_tasks_per_device() -> None:
    # 6 one-GPU tasks, 8 four-GPU tasks, 2 eight-GPU tasks: 6, 2 and 1/4 per device
    shapes = popular_shapes([(MILLI, 0, 0, 6), (4 * MILLI, 0, 0, 8), (8 * MILLI, 0, 0, 2)])
    by_devices = {s.count: s.p for s in shapes}
    assert by_devices == pytest.approx({1: 6 / 8.25, 4: 2 / 8.25, 8: 0.25 / 8.25})
    # the heaviest first, as the dashboard lists them
    assert [s.count for s in shapes] == [1, 4, 8]
    # the 32 most requested are kept, whatever they weigh: 2 one-GPU tasks lose to 3 of 8 GPUs
    kept = popular_shapes([(MILLI, 0, 0, 2), (8 * MILLI, 0, 0, 3)], top=1)
    assert [(s.count, s.p) for s in kept] == [(8, 1.0)]
    pods = [(MILLI, 0, 0, ())] * 6 + [(4 * MILLI, 0, 0, ())] * 8 + [(8 * MILLI, 0, 0, ())] * 2
    assert {s.count: s.p for s in target_workload(pods)} == pytest.approx(by_devices)


def test_cached_table_agrees_with_the_definition() -> None:
    rng = random.Random(7)
    shapes = [
        Shape(rng.random(), rng.choice([1, 1, 2, 4]), 0, rng.randrange(0, 9000, 500), 0)
        for _ in range(12)
    ]
    shapes = [
        Shape(s.p, s.count, MILLI if s.count > 1 else rng.choice([150, 470, 810, 1000]), s.cpu, 0)
        for s in shapes
    ]
    shapes.append(Shape(0.2, 1, 300, 0, 0, frozenset({"A100"})))
    for pool in ("T4", "A100"):
        table = _Table(pool, shapes)
        for _ in range(200):
            dev = tuple(sorted(rng.choice([0, 90, 190, 530, 1000]) for _ in range(4)))
            cpu = rng.randrange(0, 10_000, 250)
            hands = rng.choice([1, 2, 3])  # shares only, whole GPUs only, both
            want = fragmentation(dev, cpu, BIG, pool, shapes, hands)
            assert table.frag((dev, cpu, BIG, hands)) == pytest.approx(want)


def test_prefers_the_node_whose_fragmentation_grows_least() -> None:
    # the workload is 600-shares: a 400 share on the 700-free device would strand 300,
    # so FGD takes the whole device although best-fit would take the 700
    state = state_of(Node("a", "T4", 1, 8000, 1000), Node("b", "T4", 1, 8000, 1000))
    state._take(state.nodes["b"], (300, 0, 0), (0,), "x")
    scorer = FragmentationScorer(state.nodes.values(), [Shape(1.0, 1, 600, 0, 0)])
    assert scorer.choose((400, 100, 10), ("T4",)) == ("a", (0,))
    # among equal increases the tighter node wins
    assert scorer.choose((100, 100, 10), ("T4",)) == ("b", (0,))


def test_cpu_only_task_goes_where_it_strands_no_gpu() -> None:
    # 4 cores on node a would leave it too little CPU for the 6-core GPU tasks of the workload
    state = state_of(Node("a", "T4", 1, 8000, 1000), Node("b", "T4", 1, 8000, 1000))
    state._take(state.nodes["b"], (1000, 0, 0), (0,), "x")
    scorer = FragmentationScorer(state.nodes.values(), [Shape(1.0, 1, 1000, 6000, 0)])
    assert scorer.choose((0, 4000, 10), ("T4",)) == ("b", ())


def test_quantum_lets_the_tighter_node_win_small_differences() -> None:
    # a 700 share with 2 cores: on the big node nothing is stranded (increase 0); on the small
    # node the 3 cores left are too few for the rare 4-core shape (increase 0.02 x 300 = 6)
    shapes = [Shape(0.98, 1, 300, 0, 0), Shape(0.02, 1, 300, 4000, 0)]
    state = state_of(Node("big", "T4", 2, 100_000, 1000), Node("small", "T4", 1, 5000, 1000))
    req = (700, 2000, 10)
    exact = FragmentationScorer(state.nodes.values(), shapes, share_quantum=0.0)
    assert exact.choose(req, ("T4",))[0] == "big"
    # compared in steps of 15 the two increases are equal, and the tighter node takes it
    coarse = FragmentationScorer(state.nodes.values(), shapes, share_quantum=15.0)
    assert coarse.choose(req, ("T4",)) == ("small", (0,))
    # steps of 5 still tell 0 from 6
    fine = FragmentationScorer(state.nodes.values(), shapes, share_quantum=5.0)
    assert fine.choose(req, ("T4",))[0] == "big"


def test_among_equal_steps_a_gpu_goes_where_less_gpu_is_stranded_for_lack_of_cpu() -> None:
    # one GPU with 4 cores: F grows by 0 on both nodes (a whole GPU stays free on each). The
    # tighter node a would keep 1 GPU with 6 cores, short of 8 cores per GPU by 250 milli-GPU;
    # b keeps 3 GPUs with 60 cores and strands none, so b takes it
    state = state_of(Node("a", "T4", 2, 10_000, 1000), Node("b", "T4", 4, 64_000, 1000))
    scorer = FragmentationScorer(state.nodes.values(), [Shape(1.0, 1, MILLI, 0, 0)])
    assert scorer.choose((MILLI, 4000, 10), ("T4",)) == ("b", (0,))
    # with 8 cores left a strands nothing: the tighter node wins again
    state = state_of(Node("a", "T4", 2, 12_000, 1000), Node("b", "T4", 4, 64_000, 1000))
    scorer = FragmentationScorer(state.nodes.values(), [Shape(1.0, 1, MILLI, 0, 0)])
    assert scorer.choose((MILLI, 4000, 10), ("T4",)) == ("a", (0,))


def test_among_equal_strands_a_gpu_goes_where_less_is_left_over_cpu_counted_as_gpu() -> None:
    # one GPU with 4 cores: F grows by 0 on both nodes and neither strands GPU. a would keep
    # 1 GPU and 60 cores (8.5 GPUs' worth at 8 cores per GPU), b 2 GPUs and 20 cores (4.5): b
    # is the tighter node, though it keeps more GPU
    state = state_of(Node("a", "T4", 2, 64_000, 1000), Node("b", "T4", 3, 24_000, 1000))
    scorer = FragmentationScorer(state.nodes.values(), [Shape(1.0, 1, MILLI, 0, 0)])
    assert scorer.choose((MILLI, 4000, 10), ("T4",)) == ("b", (0,))
    # a share alike (F grows by the same 500 on both)
    assert scorer.choose((500, 4000, 10), ("T4",)) == ("b", (0,))


def test_a_cpu_only_task_is_not_steered_by_stranding() -> None:
    # no GPU shape needs CPU, so F grows by 0 on both; 2 cores on a leave its free GPU short of
    # CPU, but a CPU-only task still takes the tighter node: sent to CPU-rich nodes it would
    # take the CPU their free GPUs need
    state = state_of(Node("a", "T4", 1, 4000, 1000), Node("b", "T4", 2, 64_000, 1000))
    scorer = FragmentationScorer(state.nodes.values(), [Shape(1.0, 1, MILLI, 0, 0)])
    assert scorer.choose((0, 2000, 10), ("T4",)) == ("a", ())


def test_a_share_is_compared_in_finer_steps_than_whole_gpus() -> None:
    # on the small node 3 cores are left, too few for the 4-core shape: F grows by 30 there
    # and by 0 on the big node, for a share and for a whole GPU alike (both nodes strand as
    # much GPU for lack of CPU: 11 cores left for 2 GPUs, 3 for 1)
    state = state_of(Node("big", "T4", 3, 13_000, 1000), Node("small", "T4", 2, 5000, 1000))
    share = [Shape(0.94, 1, 500, 0, 0), Shape(0.06, 1, 500, 4000, 0)]
    whole = [Shape(0.97, 1, MILLI, 0, 0), Shape(0.03, 1, MILLI, 4000, 0)]
    # a share's steps of 20 tell 0 from 30: it goes where nothing is stranded
    assert FragmentationScorer(state.nodes.values(), share).choose((500, 2000, 10), ("T4",)) == (
        "big",
        (0,),
    )
    # a whole GPU's steps of 40 do not, and the tighter node takes it
    scorer = FragmentationScorer(state.nodes.values(), whole)
    assert scorer.choose((MILLI, 2000, 10), ("T4",)) == ("small", (0,))
    assert FragmentationScorer(state.nodes.values(), whole, quantum=20.0).choose(
        (MILLI, 2000, 10), ("T4",)
    ) == ("big", (0,))


def test_fractions_go_only_where_the_device_plugin_shares_and_whole_gpus_only_where_not() -> None:
    # each node's device plugin hands out one kind of GPU; FGD alone would choose the other node
    sliced = Node("sliced", "T4", 1, 8000, 1000, shares_gpus=True, whole_gpus=False)
    state = state_of(sliced, Node("plain", "T4", 1, 8000, 1000, shares_gpus=False))
    state._take(state.nodes["sliced"], (300, 0, 0), (0,), "x")
    shapes = [Shape(1.0, 1, 600, 0, 0)]
    # a 400 share strands 300 on the sliced node's 700 and nothing on plain's whole GPU
    assert FragmentationScorer(state.nodes.values(), shapes).choose((400, 100, 10), ("T4",)) == (
        "sliced",
        (0,),
    )
    # a whole GPU leaves nothing free on the empty sliced node (the tighter fit)
    state = state_of(sliced, Node("plain", "T4", 2, 8000, 1000, shares_gpus=False))
    scorer = FragmentationScorer(state.nodes.values(), shapes)
    assert scorer.choose((1000, 100, 10), ("T4",)) == ("plain", (0,))
    assert scorer.choose((2000, 100, 10), ("T4",)) == ("plain", (0, 1))


def test_quanta_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="^quantum must be 0 or more, got -1.0"):
        FragmentationScorer([], [], quantum=-1.0)
    with pytest.raises(ValueError, match="^share_quantum must be 0 or more, got -2.0"):
        FragmentationScorer([], [], share_quantum=-2.0)


def test_device_choice_within_a_node() -> None:
    state = state_of(Node("a", "T4", 3, 8000, 1000))
    ns = state.nodes["a"]
    state._take(ns, (500, 0, 0), (0,), "x")
    state._take(ns, (200, 0, 0), (2,), "x")
    # free shares [500, 1000, 800]; the workload wants whole GPUs, so a 300 share goes on a
    # partial device and the best-fit one among them (500 free)
    scorer = FragmentationScorer(state.nodes.values(), [Shape(1.0, 1, 1000, 0, 0)])
    assert scorer.choose((300, 0, 0), ("T4",)) == ("a", (0,))
    assert scorer.choose((2000, 0, 0), ("T4",)) is None
    assert scorer.choose((1000, 0, 0), ("T4",)) == ("a", (1,))
    assert scorer.choose((100, 0, 0), ("V100",)) is None


def _cluster(rng: random.Random) -> list[Node]:
    kinds = [("T4", 2, 16_000, 64_000), ("G2", 8, 96_000, 393_216), ("P100", 1, 8000, 32_768)]
    out = []
    for i in range(30):
        pool, gpus, cpu, mem = rng.choice(kinds)
        out.append(Node(f"n{i:02d}", pool, gpus, cpu, mem))
    return out


def _pods(rng: random.Random, k: int) -> list[tuple[int, int, int, tuple[str, ...]]]:
    gpus = [0, 160, 320, 470, 810, 1000, 1000, 2000, 4000, 8000]
    specs: list[tuple[str, ...]] = [(), (), (), ("T4",), ("G2", "P100")]
    return [
        (
            rng.choice(gpus),
            rng.randrange(0, 24_000, 500),
            rng.randrange(0, 64_000, 1024),
            rng.choice(specs),
        )
        for _ in range(k)
    ]


def _fits(state: State, name: str, req: tuple[int, int, int], devices: tuple[int, ...]) -> bool:
    ns = state.nodes[name]
    n, share = split_gpu(req[0])
    if req[1] > ns.cpu or req[2] > ns.mem or len(devices) != n or len(set(devices)) != n:
        return False
    return all(ns.dev[i] >= share for i in devices)


def _any_fit(state: State, req: tuple[int, int, int], pools: tuple[str, ...]) -> bool:
    n, share = split_gpu(req[0])
    for ns in state.nodes.values():
        if ns.pool not in pools or req[1] > ns.cpu or req[2] > ns.mem:
            continue
        if sum(1 for d in ns.dev if d >= share) >= n:
            return True
    return False


def _run(
    seed: int, quantum: float, reverse: bool = False
) -> list[tuple[str, tuple[int, ...]] | None]:
    rng = random.Random(seed)
    nodes = _cluster(rng)
    pods = _pods(rng, 400)
    state = state_of(*(reversed(nodes) if reverse else nodes))
    pools_all = tuple(sorted(state.pools))
    scorer = FragmentationScorer(
        state.nodes.values(), target_workload(pods), quantum, share_quantum=quantum
    )
    out: list[tuple[str, tuple[int, ...]] | None] = []
    for gpu, cpu, mem, spec in pods:
        req = (gpu, cpu, mem)
        pools = spec or pools_all
        choice = scorer.choose(req, pools)
        if choice is None:
            assert not _any_fit(state, req, pools)
        else:
            assert state.nodes[choice[0]].pool in pools
            assert _fits(state, choice[0], req, choice[1])
            ns = state.nodes[choice[0]]
            state._take(ns, req, choice[1], "pod")
            scorer.update(ns)
        out.append(choice)
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("quantum", [0.0, 15.0])
def test_never_picks_a_node_where_the_task_does_not_fit(seed: int, quantum: float) -> None:
    placed = _run(seed, quantum)
    assert any(c is not None for c in placed) and any(c is None for c in placed)


@pytest.mark.parametrize("seed", range(3))
def test_deterministic_and_independent_of_node_order(seed: int) -> None:
    first = _run(seed, 15.0)
    assert _run(seed, 15.0) == first
    assert _run(seed, 15.0, reverse=True) == first


def _placements(seed: int, scorer_of: Callable[[State], FragmentationScorer]) -> list[object]:
    """Three working states of one cluster, each taking pods and giving some back, scored by
    scorer_of(state): a scorer built afresh, or the thread's one carried from state to state."""
    rng = random.Random(seed)
    nodes = _cluster(rng)
    pods = _pods(rng, 150)
    target = tuple(target_workload(pods))
    out: list[object] = []
    for round_ in range(3):
        snap = Snapshot(0, tuple(nodes), (), (), "tree", target=target)
        state = State(snap)
        taken: list[tuple[str, tuple[int, int, int], tuple[int, ...]]] = []
        for gpu, cpu, mem, spec in pods[round_ * 50 : round_ * 50 + 80]:
            req = (gpu, cpu, mem)
            pools = spec or tuple(sorted(state.pools))
            choice = scorer_of(state).choose(req, pools)
            out.append(choice)
            if choice is not None:
                state._take(state.nodes[choice[0]], req, choice[1], "pod")
                taken.append((choice[0], req, choice[1]))
            if taken and rng.random() < 0.3:  # a trial placement undone
                name, req, devices = taken.pop(rng.randrange(len(taken)))
                state._give(state.nodes[name], req, devices, "pod")
    return out


def _fresh(state: State) -> FragmentationScorer:
    return FragmentationScorer(state.nodes.values(), state.target)


@pytest.mark.parametrize("seed", range(4))
def test_a_scorer_carried_from_state_to_state_chooses_as_a_fresh_one(seed: int) -> None:
    # the thread's scorer keeps its rankings across working states (cycles); what it chooses
    # must depend on the nodes as they are only, never on what it saw before
    assert _placements(seed, State.scorer) == _placements(seed, _fresh)


def test_two_working_states_in_turn_each_see_their_own_nodes() -> None:
    nodes = (Node("a", "T4", 1, 8000, 1000), Node("b", "T4", 2, 8000, 1000))
    one, two = State(Snapshot(0, nodes, (), (), "tree")), State(Snapshot(0, nodes, (), (), "tree"))
    one._take(one.nodes["b"], (2000, 0, 0), (0, 1), "x")
    assert one.scorer().choose((1000, 0, 0), ("T4",)) == ("a", (0,))
    assert two.scorer().choose((2000, 0, 0), ("T4",)) == ("b", (0, 1))
    # back to the first state: its node b is still full
    assert one.scorer().choose((1000, 0, 0), ("T4",)) == ("a", (0,))
    assert one.scorer().choose((2000, 0, 0), ("T4",)) is None


def test_each_thread_has_its_own_scorer() -> None:
    nodes = (Node("a", "T4", 1, 8000, 1000),)
    here = State(Snapshot(0, nodes, (), (), "tree")).scorer()
    there: list[FragmentationScorer] = []
    thread = threading.Thread(
        target=lambda: there.append(State(Snapshot(0, nodes, (), (), "tree")).scorer())
    )
    thread.start()
    thread.join()
    assert there and there[0] is not here


def test_the_rank_key_orders_as_its_parts() -> None:
    rng = random.Random(3)
    parts = [
        (
            rng.randint(-400, 400),
            rng.choice((0, rng.randint(0, 16_000))),
            rng.randint(0, 16_000),
            rng.randint(0, 256_000),
        )
        for _ in range(2000)
    ]
    assert sorted(parts) == sorted(parts, key=lambda p: _key(*p))


def test_a_states_order_sorts_as_its_signature() -> None:
    # a ranking compares a move's integer, its state's order included, before the signature: the
    # order must never contradict the signature (ties are allowed: the signature decides them),
    # with devices beyond those it encodes and values beyond its caps
    rng = random.Random(5)
    sigs = set()
    for _ in range(600):
        n = rng.choice([0, 1, 2, 8, 16, 17, 20])
        dev = tuple(sorted(rng.choice([0, 250, 500, MILLI]) for _ in range(n)))
        cpu = rng.choice([0, 8000, 1 << 25, 1 << 26])
        mem = rng.choice([0, 1024, 1 << 33, 1 << 34])
        sigs.add((dev, cpu, mem, rng.randint(1, 3)))
        sigs.add((dev + (MILLI,), cpu, mem, 3))  # a prefix of another
    ordered = sorted(sigs)
    assert sorted(sigs, key=lambda s: (_order(s), s)) == ordered
    orders = [_order(s) for s in ordered]
    assert orders == sorted(orders)
    # within the devices and values it encodes, the integer alone tells every state apart
    inside = [s for s in ordered if len(s[0]) <= 16 and s[1] < 1 << 24 and s[2] < 1 << 32]
    assert len(inside) > 100
    assert len({_order(s) for s in inside}) == len(inside)
    # a state the scorer takes as exact shares its order with no other state at all
    exact = [s for s in ordered if _exact(s)]
    assert len(exact) > 100
    orders = Counter(_order(s) for s in ordered)
    assert all(orders[_order(s)] == 1 for s in exact)


def test_a_node_cordoned_or_gone_in_the_next_state_is_never_chosen() -> None:
    # a carried scorer syncs to each working state: a node no longer schedulable, or no longer
    # there, leaves its state, and comes back when a later state has it again
    a, b = Node("a", "T4", 1, 8000, 1000), Node("b", "T4", 2, 8000, 1000)
    first = State(Snapshot(0, (a, b), (), (), "tree"))
    assert first.scorer().choose((1000, 0, 0), ("T4",)) == ("a", (0,))
    cordoned = State(Snapshot(0, (replace(a, schedulable=False), b), (), (), "tree"))
    assert cordoned.scorer().choose((1000, 0, 0), ("T4",)) == ("b", (0,))
    gone = State(Snapshot(0, (b,), (), (), "tree"))
    assert gone.scorer().choose((1000, 0, 0), ("T4",)) == ("b", (0,))
    back = State(Snapshot(0, (a, b), (), (), "tree"))
    assert back.scorer().choose((1000, 0, 0), ("T4",)) == ("a", (0,))


def test_states_beyond_what_the_order_encodes_are_told_apart_by_signature() -> None:
    # 20 devices, 16 of them taken: an order encodes a state's 16 fullest devices, so the orders of
    # a and b tie, and so do their moves for a quarter GPU (each ends with 750 milli-GPU on
    # partly free devices and 2750 free); the signature decides, as it does for smaller
    # nodes: b's (..., 250, 750, ...) sorts before a's (..., 500, 500, ...), though the scorer
    # saw a's state first
    state = state_of(Node("a", "X", 20, 8000, 1000), Node("b", "X", 20, 8000, 1000))
    for name, taken in (("a", (500, 500)), ("b", (750, 250))):
        ns = state.nodes[name]
        state._take(ns, (16 * MILLI, 0, 0), tuple(range(16)), "pod")
        for i, gpu in enumerate(taken):
            state._take(ns, (gpu, 0, 0), (16 + i,), "pod")
    scorer = FragmentationScorer(state.nodes.values(), (Shape(1.0, 1, MILLI, 0, 0),), 0.0, 0.0)
    assert scorer.choose((250, 0, 0), ("X",)) == ("b", (16,))
    # a service's replica, on nodes free of its replicas, breaks the tie the same way
    assert scorer.choose((250, 0, 0), ("X",), "svc") == ("b", (16,))


@pytest.mark.parametrize("taken", [10, 300])
def test_states_gone_past_the_best_are_chosen_as_by_a_fresh_scorer_when_back(taken: int) -> None:
    # 320 one-GPU nodes, each in a state of its own (its CPU): a GPU goes to the one with the
    # least CPU left, whose state is then gone, past the best live one. A ranking keeps 10
    # such and drops 300 (more than _TAIL_KEPT). When some nodes are given back, their states
    # come alive again, and the scorer must choose as one built afresh on the same nodes.
    state = state_of(*(Node(f"n{i:03}", "T4", 1, 1000 + 10 * i, 1000) for i in range(320)))
    shapes = (Shape(1.0, 1, MILLI, 0, 0),)
    scorer = FragmentationScorer(state.nodes.values(), shapes)
    req = (MILLI, 500, 0)

    def take(choice: tuple[str, tuple[int, ...]] | None) -> str:
        assert choice is not None
        ns = state.nodes[choice[0]]
        state._take(ns, req, choice[1], "pod")
        scorer.update(ns)
        return choice[0]

    assert [take(scorer.choose(req, ("T4",))) for _ in range(taken)] == [
        f"n{i:03}" for i in range(taken)
    ]
    given = [f"n{i:03}" for i in range(0, taken, 3)]  # every third, the first included
    for name in given:
        ns = state.nodes[name]
        state._give(ns, req, (0,), "pod")
        scorer.update(ns)
    chosen = []
    for _ in range(len(given) + 5):
        fresh = FragmentationScorer(state.nodes.values(), shapes).choose(req, ("T4",))
        assert scorer.choose(req, ("T4",)) == fresh
        chosen.append(take(fresh))
    assert chosen == [*given, *(f"n{i:03}" for i in range(taken, taken + 5))]


def test_a_state_dropped_by_a_rebuilt_ranking_is_ranked_again_when_back() -> None:
    # node a takes 1,100 CPU-only tasks one by one: each is a new state of a, which the ranking
    # of a GPU request sees alive and keeps when it is gone, until gone states outgrow the
    # live ones and the ranking keeps the live ones only. Given back, a is in its first state
    # again, dropped by then: the scorer must rank it again, and a (less CPU left) wins again.
    state = state_of(Node("a", "T4", 1, 16_000, 1000), Node("b", "T4", 1, 32_000, 1000))
    scorer = FragmentationScorer(state.nodes.values(), (Shape(1.0, 1, MILLI, 0, 0),))
    gpu, cpu = (MILLI, 0, 0), (0, 1, 0)
    a = state.nodes["a"]
    assert scorer.choose(gpu, ("T4",)) == ("a", (0,))
    for _ in range(1100):
        state._take(a, cpu, (), "pod")
        scorer.update(a)
        assert scorer.choose(gpu, ("T4",)) == ("a", (0,))
    assert len(scorer.rankings[("T4", gpu)].ranked) < 1100  # rebuilt
    for _ in range(1100):
        state._give(a, cpu, (), "pod")
    scorer.update(a)
    fresh = FragmentationScorer(state.nodes.values(), (Shape(1.0, 1, MILLI, 0, 0),))
    assert scorer.choose(gpu, ("T4",)) == fresh.choose(gpu, ("T4",)) == ("a", (0,))
