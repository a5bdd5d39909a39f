"""The live cycle's placement: fragmentation-aware by default, best fit as a setting, never
over-allocating, and the openb replay making exactly the cycle's decisions."""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.replay_openb import Decision, Pod, cluster_quota, replay
from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.fragmentation import DEFAULT_TARGET, Shape, target_workload
from jobs.scheduling.types import (
    MILLI,
    Node,
    Placement,
    Resources,
    ScenarioError,
    Snapshot,
    Workload,
)

REPO = Path(__file__).resolve().parents[2]
HALF_SHARES = (Shape(1.0, 1, 500, 0, 0),)


def one_cycle(
    nodes: list[Node],
    running: list[Workload],
    new: Workload,
    placement: str,
    target: tuple[Shape, ...] = (),
) -> str | None:
    """The node the cycle gives `new`, or None."""
    snap = Snapshot(
        0.0,
        tuple(nodes),
        (cluster_quota(nodes),),
        (*running, new),
        target=target,
        placement=placement,
    )
    admitted = {a.workload: a.placements for a in run_cycle(snap).admitted}
    got = admitted.get(new.name)
    return None if got is None else got[0].node


def job(name: str, gpu: int, cpu: int = 0, on: tuple[Placement, ...] = ()) -> Workload:
    return Workload(
        name, "cluster", "training", max(1, len(on)), Resources(gpu, cpu), ("T4",), running=on
    )


def test_a_shared_request_keeps_a_device_whole_enough_for_the_common_share() -> None:
    # a 500 share: best fit takes a's device with 600 free, leaving 100 that no half-GPU task
    # can use; fragmentation-aware placement halves b's whole device instead
    nodes = [Node("a", "T4", 1, 64_000, 10**6), Node("b", "T4", 1, 64_000, 10**6)]
    running = [job("old", 400, on=(Placement("a", (0,)),))]
    new = job("new", 500)
    assert one_cycle(nodes, running, new, "bestfit", HALF_SHARES) == "a"
    assert one_cycle(nodes, running, new, "fgd", HALF_SHARES) == "b"


def test_a_gpu_is_not_left_without_the_cpu_the_common_task_needs() -> None:
    # one GPU with 30 cores: best fit takes x (2 cores left, so x's last GPU strands for an
    # 8-core task); fragmentation-aware placement takes y, where 34 cores stay
    nodes = [Node("x", "T4", 2, 32_000, 10**6), Node("y", "T4", 2, 64_000, 10**6)]
    new = job("new", MILLI, cpu=30_000)
    target = (Shape(1.0, 1, MILLI, 8_000, 0),)
    assert one_cycle(nodes, [], new, "bestfit", target) == "x"
    assert one_cycle(nodes, [], new, "fgd", target) == "y"


def test_the_default_placement_is_fragmentation_aware_on_the_default_target() -> None:
    nodes, pods = small_trace(7)
    quotas = (cluster_quota(nodes),)
    pools = tuple(sorted({n.pool for n in nodes}))
    jobs = tuple(
        Workload(f"a{i:03}", "cluster", "training", 1, Resources(g, c, m), spec or pools)
        for i, (g, c, m, spec) in enumerate(pods)
    )
    default = Snapshot(0.0, tuple(nodes), quotas, jobs)
    assert default.placement == "fgd" and default.target == ()
    explicit = replace(default, target=DEFAULT_TARGET)
    best_fit = replace(default, placement="bestfit")
    assert run_cycle(default).admitted == run_cycle(explicit).admitted
    assert run_cycle(default).admitted != run_cycle(best_fit).admitted


def test_an_unknown_placement_is_refused_by_name() -> None:
    snap = Snapshot(0.0, (), (), (), placement="random")
    with pytest.raises(ScenarioError, match="placement must be fgd or bestfit, not 'random'"):
        run_cycle(snap)


def test_inference_replicas_spread_over_nodes() -> None:
    nodes = [Node(f"n{i}", "T4", 4, 64_000, 10**6) for i in range(3)]
    svc = replace(job("svc", MILLI), kind="inference", replicas=3)
    snap = Snapshot(0.0, tuple(nodes), (cluster_quota(nodes),), (svc,))
    placed = run_cycle(snap).admitted[0].placements
    assert sorted(p.node for p in placed) == ["n0", "n1", "n2"]


# --- never over-allocated ---------------------------------------------------------------

GPU_REQUESTS = st.sampled_from([0, 100, 250, 300, 470, 500, 810, 1000, 2000, 4000, 8000])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=5),
    st.lists(
        st.tuples(GPU_REQUESTS, st.integers(0, 16_000), st.integers(0, 64_000)),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from(["fgd", "bestfit"]),
    st.booleans(),
)
def test_placement_never_over_allocates(
    gpus: list[int], requests: list[tuple[int, int, int]], placement: str, batched: bool
) -> None:
    nodes = [Node(f"n{i}", "T4", g, 32_000, 128_000) for i, g in enumerate(gpus)]
    running: list[Workload] = []
    chunks = [requests] if batched else [[r] for r in requests]
    i = 0
    for chunk in chunks:
        new = []
        for gpu, cpu, mem in chunk:
            new.append(
                Workload(f"w{i:03}", "cluster", "training", 1, Resources(gpu, cpu, mem), ("T4",))
            )
            i += 1
        snap = Snapshot(
            0.0, tuple(nodes), (cluster_quota(nodes),), (*running, *new), placement=placement
        )
        placed = {a.workload: a.placements for a in run_cycle(snap).admitted}
        running.extend(replace(w, running=placed[w.name]) for w in new if w.name in placed)
    dev = {n.name: [MILLI] * n.gpus for n in nodes}
    cpu_left = {n.name: n.cpu for n in nodes}
    mem_left = {n.name: n.memory for n in nodes}
    for w in running:
        r = w.request
        share = r.gpu if r.gpu < MILLI else MILLI
        for p in w.running:
            assert len(p.devices) == (0 if r.gpu == 0 else max(1, r.gpu // MILLI))
            for d in p.devices:
                dev[p.node][d] -= share
            cpu_left[p.node] -= r.cpu
            mem_left[p.node] -= r.memory
    assert all(d >= 0 for devs in dev.values() for d in devs)
    assert all(c >= 0 for c in cpu_left.values()) and all(m >= 0 for m in mem_left.values())


# --- the openb replay is the cycle ------------------------------------------------------


def small_trace(seed: int) -> tuple[list[Node], list[Pod]]:
    rng = random.Random(seed)
    nodes = [
        Node(f"n{i:02}", rng.choice(["T4", "V100"]), rng.choice([2, 4, 8]), 32_000, 256_000)
        for i in range(10)
    ]
    pods: list[Pod] = []
    for _ in range(50):
        gpu = rng.choice([0, 200, 250, 470, 500, 810, 1000, 1000, 2000, 4000, 8000])
        spec = rng.choice([(), (), ("T4",), ("V100",)])
        pods.append((gpu, rng.choice([0, 2000, 8000]), rng.choice([0, 16_000]), spec))
    return nodes, pods


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("placement", ["fgd", "bestfit"])
def test_the_replay_makes_the_cycles_decisions_arrival_by_arrival(
    seed: int, placement: str
) -> None:
    nodes, pods = small_trace(seed)
    seen: list[tuple[Pod, Decision]] = []
    replay(nodes, pods, 1.3, seed, placement, 1, lambda p, d: seen.append((p, d)))
    assert any(d is None for _, d in seen) and any(d is not None for _, d in seen)
    # every arrival alone in a cycle over the pods placed before it, each its own job
    quotas = (cluster_quota(nodes),)
    pools = tuple(sorted({n.pool for n in nodes}))
    running: list[Workload] = []
    for i, (pod, decision) in enumerate(seen):
        gpu, cpu, mem, spec = pod
        w = Workload(f"a{i:05}", "cluster", "training", 1, Resources(gpu, cpu, mem), spec or pools)
        snap = Snapshot(
            float(i),
            tuple(nodes),
            quotas,
            (*running, w),
            target=tuple(target_workload(pods)),
            placement=placement,
        )
        admitted = run_cycle(snap).admitted
        got = None if not admitted else admitted[0].placements[0]
        assert (None if got is None else (got.node, got.devices)) == decision, f"arrival {i}"
        if admitted:
            running.append(replace(w, running=admitted[0].placements))
    # the batched mode places the same arrivals in the same places
    batched: list[tuple[Pod, Decision]] = []
    replay(nodes, pods, 1.3, seed, placement, 7, lambda p, d: batched.append((p, d)))
    assert batched == seen


def test_a_failing_replay_worker_ends_the_bench_with_its_error(tmp_path: Path) -> None:
    # the workers read the traces themselves: a pod list without num_gpu fails in them
    pods = tmp_path / "openb_pod_list_broken.csv"
    pods.write_text("name,cpu_milli,memory_mib\np1,1000,1024\n")
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,32000,262144,8,T4\n")
    args = ["--nodes", str(nodes), "--pods", str(pods), "--seeds", "2", "--jobs", "2"]
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "replay_openb.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,  # a hang fails the test instead of blocking the suite
    )
    assert done.returncode != 0
    assert "KeyError: 'num_gpu'" in done.stderr
