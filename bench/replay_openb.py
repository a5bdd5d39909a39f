"""Replay the openb trace through the core's placement in the FGD paper's protocol."""

from __future__ import annotations

import argparse
import csv
import functools
import json
import multiprocessing
import random
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import OPENB_TRACES  # noqa: E402
from jobs.scheduling.fragmentation import FragmentationScorer, target_workload  # noqa: E402
from jobs.scheduling.placement import find_node, find_node_fgd, workload_profile  # noqa: E402
from jobs.scheduling.snapshot import State  # noqa: E402
from jobs.scheduling.types import MILLI, Node, Snapshot  # noqa: E402

Pod = tuple[int, int, int, tuple[str, ...]]  # gpu milli per replica slot, cpu, memory, pools


def load_nodes(path: Path) -> list[Node]:
    """Nodes from the openb node list; the GPU model is the pool."""
    with path.open() as fh:
        return [
            Node(r["sn"], r["model"], int(r["gpu"]), int(r["cpu_milli"]), int(r["memory_mib"]))
            for r in csv.DictReader(fh)
        ]


def load_pods(path: Path) -> list[Pod]:
    """Pods as (milli-GPU, cpu, memory, accepted pools); gpu_milli counts when num_gpu=1.

    CPU-only pods (num_gpu 0) are kept: the paper's simulator schedules them too, and the CPU
    they take can strand GPUs. Trace variants without a gpu_spec column accept any model.
    """
    pods: list[Pod] = []
    with path.open() as fh:
        for r in csv.DictReader(fh):
            n = int(r["num_gpu"])
            gpu = int(r["gpu_milli"]) if n == 1 else n * MILLI
            spec = tuple(p for p in (r.get("gpu_spec") or "").split("|") if p)
            pods.append((gpu, int(r["cpu_milli"]), int(r["memory_mib"]), spec))
    return pods


def arrivals(pods: list[Pod], capacity: int, inflate: float, rng: random.Random) -> Iterator[Pod]:
    """Pods in arrival order until their GPU request reaches `inflate` times the capacity.

    As the paper's simulator does (SortClusterPods, then TunePodsByNodeTotalResource): the whole
    pod list first, shuffled by the seeded RNG, then pods drawn from it with replacement. The pod
    whose request crosses the target is the last one.
    """
    order = list(pods)
    rng.shuffle(order)
    arrived = 0
    for pod in order:
        if arrived >= inflate * capacity:
            return
        arrived += pod[0]
        yield pod
    while arrived < inflate * capacity:
        pod = rng.choice(pods)
        arrived += pod[0]
        yield pod


def replay(
    nodes: list[Node],
    pods: list[Pod],
    inflate: float,
    seed: int,
    policy: str,
    cpu_pods: bool = True,
    quantum: float = 40.0,
    gpu_weight: float = 0.0,
) -> dict[str, float]:
    """Submit the arrivals one by one (no departures) and record the allocated share.

    A pod that fits nowhere is dropped, never retried. The marks are taken right after the pod
    whose arrival crosses 100% (and the end, `inflate`) of capacity.
    """
    rng = random.Random(seed)
    state = State(Snapshot(0, tuple(nodes), (), (), "tree"))
    all_pools = tuple(sorted(state.pools))
    capacity = sum(n.gpus for n in nodes) * MILLI
    gpu_pods = [p for p in pods if p[0] > 0]
    source = pods if cpu_pods else gpu_pods
    profile = workload_profile([(p[0], p[1], p[2]) for p in gpu_pods])
    scorer = None
    if policy == "fgd2":
        shapes = target_workload(pods, gpu_weight=gpu_weight)
        scorer = FragmentationScorer(state.nodes.values(), shapes, quantum)
    arrived = 0
    allocated = 0
    marks: dict[str, float] = {}
    for gpu, cpu, mem, spec in arrivals(source, capacity, inflate, rng):
        arrived += gpu
        req = (gpu, cpu, mem)
        pools = spec or all_pools
        if scorer is not None:
            choice = scorer.choose(req, pools)
        elif policy == "fgd":
            choice = find_node_fgd(state, req, pools, profile)
        else:
            choice = find_node(state, req, pools, False)
        if choice is not None:
            ns = state.nodes[choice[0]]
            state._take(ns, req, choice[1], "pod")
            if scorer is not None:
                scorer.update(ns)
            allocated += gpu
        if "at_100" not in marks and arrived >= capacity:
            marks["at_100"] = 100 * allocated / capacity
    marks["at_130"] = 100 * allocated / capacity
    return marks


def _one(
    nodes: list[Node],
    pods: list[Pod],
    inflate: float,
    policy: str,
    cpu_pods: bool,
    quantum: float,
    gpu_weight: float,
    seed: int,
) -> dict[str, float]:
    return replay(nodes, pods, inflate, seed, policy, cpu_pods, quantum, gpu_weight)


def main() -> None:
    """Print one JSON object with the means over seeds."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=Path, default=OPENB_TRACES / "openb_node_list_gpu_node.csv")
    parser.add_argument("--pods", type=Path, default=OPENB_TRACES / "openb_pod_list_default.csv")
    parser.add_argument("--inflate", type=float, default=1.3)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--policy", choices=("fgd2", "fgd", "bestfit"), default="fgd2")
    parser.add_argument(
        "--skip-cpu-pods", action="store_true", help="old replay: draw GPU pods only"
    )
    parser.add_argument(
        "--quantum",
        type=float,
        default=40.0,
        help="fgd2 compares increases of fragmentation in these milli-GPU steps (0 = exactly)",
    )
    parser.add_argument(
        "--gpu-weight",
        type=float,
        default=0.0,
        help="fgd2 target workload: a shape weighs pods x milli-GPU ** this (0 = by pod count)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="seeds run in parallel")
    args = parser.parse_args()
    t0 = time.perf_counter()
    nodes = load_nodes(args.nodes)
    pods = load_pods(args.pods)
    job = functools.partial(
        _one,
        nodes,
        pods,
        args.inflate,
        args.policy,
        not args.skip_cpu_pods,
        args.quantum,
        args.gpu_weight,
    )
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            runs = pool.map(job, range(args.seeds))
    else:
        runs = [job(seed) for seed in range(args.seeds)]
    at_130 = [r["at_130"] for r in runs]
    print(
        json.dumps(
            {
                "policy": args.policy,
                "seeds": args.seeds,
                "inflate": args.inflate,
                "pods": args.pods.name,
                "cpu_pods": not args.skip_cpu_pods,
                **(
                    {"quantum": args.quantum, "gpu_weight": args.gpu_weight}
                    if args.policy == "fgd2"
                    else {}
                ),
                "gpu_alloc_pct_at_100": round(statistics.mean(r["at_100"] for r in runs), 2),
                "gpu_alloc_pct_at_130": round(statistics.mean(at_130), 2),
                "at_130_min": round(min(at_130), 2),
                "at_130_max": round(max(at_130), 2),
                "at_130_per_seed": [round(v, 2) for v in at_130],
                "seconds": round(time.perf_counter() - t0, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
