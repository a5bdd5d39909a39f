"""Replay openb pod lists through the scheduling cycle in the FGD paper's protocol.

Each arrival is a one-replica training job submitted to run_cycle, the live cycle, with the
snapshot's placement policy and the pod list's target workload (shapes by their pods per
device, as the live target: fragmentation.task_weight; the paper's FGD weighs by pods): one
arrival per cycle as the paper submits pods one by one (`--batch 1`, the default), or
`--batch N` arrivals per cycle. A pod the cycle leaves waiting is dropped, never retried;
nothing departs.

The pod lists: three are in ../shared/traces/openb/; the whole family (cpu, gpushare, gpuspec
and multigpu variants) is in the public repository alibaba/clusterdata, folder
cluster-trace-gpu-v2023/csv (also data/csv of hkust-adsl/kubernetes-scheduler-simulator, whose
experiments/analysis/expected_results/analysis_allo_discrete.csv holds the paper's results,
summarised in PAPER below). Point `--traces` at a folder holding them, or name files with --pods:

    python bench/replay_openb.py --inflate 1.3 --seeds 10 --traces DIR --pods default gpushare40
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import OPENB_TRACES  # noqa: E402
from jobs.scheduling._loader import load  # noqa: E402

COMPILED = load() == "compiled"  # before the core's modules are imported
from jobs.scheduling.cycle import run_cycle  # noqa: E402
from jobs.scheduling.fragmentation import target_workload  # noqa: E402
from jobs.scheduling.types import (  # noqa: E402
    MILLI,
    Node,
    Placement,
    Quota,
    Resources,
    Snapshot,
    Workload,
)

Pod = tuple[int, int, int, tuple[str, ...]]  # milli-GPU per replica, cpu, memory, pools
Decision = tuple[str, tuple[int, ...]] | None  # (node, devices), or None when left waiting
NODES = "openb_node_list_gpu_node.csv"
# The paper simulator's expected results (mean of 10 seeds): allocated % at 100% and 130%.
PAPER: dict[str, dict[str, tuple[float, float]]] = {
    "default": {"bestfit": (92.86, 93.08), "fgd": (95.23, 95.39)},
    "cpu050": {"bestfit": (93.56, 93.79), "fgd": (95.00, 95.21)},
    "cpu100": {"bestfit": (93.26, 93.44), "fgd": (95.21, 95.35)},
    "cpu200": {"bestfit": (92.15, 92.40), "fgd": (94.82, 95.05)},
    "cpu250": {"bestfit": (91.21, 91.45), "fgd": (93.20, 93.41)},
    "gpushare40": {"bestfit": (91.44, 91.69), "fgd": (93.96, 94.15)},
    "gpushare60": {"bestfit": (89.06, 89.36), "fgd": (91.25, 91.40)},
    "gpushare80": {"bestfit": (86.66, 87.01), "fgd": (89.08, 89.30)},
    "gpushare100": {"bestfit": (84.62, 85.01), "fgd": (86.64, 86.90)},
    "gpuspec10": {"bestfit": (93.10, 93.30), "fgd": (94.66, 94.95)},
    "gpuspec20": {"bestfit": (88.46, 93.30), "fgd": (94.66, 94.84)},
    "gpuspec25": {"bestfit": (85.67, 93.23), "fgd": (93.91, 94.74)},
    "gpuspec33": {"bestfit": (80.39, 93.09), "fgd": (87.84, 94.55)},
    "multigpu20": {"bestfit": (93.73, 93.93), "fgd": (95.53, 95.65)},
    "multigpu30": {"bestfit": (94.57, 94.72), "fgd": (96.36, 96.46)},
    "multigpu40": {"bestfit": (95.10, 95.23), "fgd": (96.91, 96.99)},
    "multigpu50": {"bestfit": (95.62, 95.74), "fgd": (97.09, 97.18)},
}


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
            spec = tuple(sorted(p for p in (r.get("gpu_spec") or "").split("|") if p))
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


def cluster_quota(nodes: list[Node]) -> Quota:
    """One quota whose min is the whole cluster: every arrival that fits starts In Quota."""
    caps: dict[str, Resources] = {}
    for n in nodes:
        caps[n.pool] = caps.get(n.pool, Resources()) + Resources(n.gpus * MILLI, n.cpu, n.memory)
    return Quota("cluster", None, caps)


class Replay:
    """The cluster as the cycle leaves it: placed pods grouped by shape into running jobs."""

    def __init__(self, nodes: list[Node], pods: list[Pod], placement: str) -> None:
        self.nodes = tuple(nodes)
        self.quotas = (cluster_quota(nodes),)
        self.pools = tuple(sorted({n.pool for n in nodes}))
        self.target = tuple(target_workload(pods))
        self.placement = placement
        # (gpu, cpu, memory, pools) -> placements of the pods of that shape
        self.running: dict[Pod, list[Placement]] = {}
        self.cycles = 0

    def _job(self, name: str, pod: Pod, placements: tuple[Placement, ...]) -> Workload:
        gpu, cpu, mem, spec = pod
        return Workload(
            name,
            "cluster",
            "training",
            max(1, len(placements)),
            Resources(gpu, cpu, mem),
            spec or self.pools,
            running=placements,
        )

    def cycle(self, batch: list[Pod]) -> list[Decision]:
        """Submit a batch of arrivals in one cycle; where each one went."""
        self.cycles += 1
        running = [
            self._job(f"run-{i:04}", pod, tuple(pl))
            for i, (pod, pl) in enumerate(self.running.items())
        ]
        new = [self._job(f"pod-{i:04}", pod, ()) for i, pod in enumerate(batch)]
        snap = Snapshot(
            float(self.cycles),
            self.nodes,
            self.quotas,
            (*running, *new),
            target=self.target,
            placement=self.placement,
        )
        placed = {a.workload: a.placements[0] for a in run_cycle(snap).admitted}
        out: list[Decision] = []
        for w, pod in zip(new, batch, strict=True):
            p = placed.get(w.name)
            if p is not None:
                self.running.setdefault(pod, []).append(p)
            out.append(None if p is None else (p.node, p.devices))
        return out


def replay(
    nodes: list[Node],
    pods: list[Pod],
    inflate: float,
    seed: int,
    placement: str = "fgd",
    batch: int = 1,
    record: Callable[[Pod, Decision], None] | None = None,
) -> dict[str, float]:
    """Submit the arrivals `batch` per cycle and record the allocated share of the GPUs.

    The marks are taken after the cycle holding the pod whose arrival crosses 100% of the
    capacity (at_100), and at the end (at_130 for the usual inflate of 1.3).
    """
    rng = random.Random(seed)
    run = Replay(nodes, pods, placement)
    capacity = sum(n.gpus for n in nodes) * MILLI
    arrived = allocated = 0
    marks: dict[str, float] = {}
    pending: list[Pod] = []
    stream = arrivals(pods, capacity, inflate, rng)
    while True:
        pod = next(stream, None)
        if pod is not None:
            pending.append(pod)
            arrived += pod[0]
        crossing = "at_100" not in marks and arrived >= capacity
        if pending and (pod is None or len(pending) >= batch or crossing):
            for p, decision in zip(pending, run.cycle(pending), strict=True):
                if decision is not None:
                    allocated += p[0]
                if record is not None:
                    record(p, decision)
            pending = []
        if crossing:
            marks["at_100"] = 100 * allocated / capacity
        if pod is None:
            break
    marks["at_130"] = 100 * allocated / capacity
    marks["cycles"] = run.cycles
    return marks


@cache
def _trace(nodes: str, pods: str) -> tuple[list[Node], list[Pod]]:
    """The node and pod lists, read once per process."""
    return load_nodes(Path(nodes)), load_pods(Path(pods))


def seed_run(job: tuple[str, str, float, int, str, int]) -> dict[str, float]:
    """One seed from plain values: a worker reads the traces and imports the core itself."""
    nodes_path, pods_path, inflate, seed, placement, batch = job
    nodes, pods = _trace(nodes_path, pods_path)
    return replay(nodes, pods, inflate, seed, placement, batch)


def variant(path: Path) -> str:
    """The variant name of a pod list (openb_pod_list_gpushare40.csv -> gpushare40)."""
    return path.stem.removeprefix("openb_pod_list_")


def measure(
    args: argparse.Namespace, pods: Path, pool: ProcessPoolExecutor | None
) -> dict[str, object]:
    """Means over the seeds for one pod list, beside the paper's figures."""
    t0 = time.perf_counter()
    jobs = [
        (str(args.nodes), str(pods), args.inflate, seed, args.placement, args.batch)
        for seed in range(args.seeds)
    ]
    # a failing worker raises here (map re-raises its exception; a dead one breaks the pool)
    runs = list(pool.map(seed_run, jobs)) if pool is not None else [seed_run(j) for j in jobs]
    at_130 = [r["at_130"] for r in runs]
    paper = PAPER.get(variant(pods), {})
    return {
        "pods": variant(pods),
        "placement": args.placement,
        "batch": args.batch,
        "seeds": args.seeds,
        "inflate": args.inflate,
        "core": "compiled" if COMPILED else "pure",
        "gpu_alloc_pct_at_100": (
            round(statistics.mean(r["at_100"] for r in runs), 2) if args.inflate >= 1 else None
        ),
        "gpu_alloc_pct_at_130": round(statistics.mean(at_130), 2),
        "at_130_min": round(min(at_130), 2),
        "at_130_max": round(max(at_130), 2),
        "paper_bestfit_100_130": paper.get("bestfit"),
        "paper_fgd_100_130": paper.get("fgd"),
        "margin_vs_paper_fgd_130": (
            round(statistics.mean(at_130) - paper["fgd"][1], 2) if paper else None
        ),
        "cycles_per_seed": round(statistics.mean(r["cycles"] for r in runs)),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main() -> None:
    """Print one JSON object per pod list."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=Path, default=OPENB_TRACES, help="folder of the lists")
    parser.add_argument("--nodes", type=Path, help=f"node list (default: TRACES/{NODES})")
    parser.add_argument(
        "--pods",
        nargs="+",
        default=["default"],
        help="pod lists: files, or variant names looked up in TRACES (default, gpushare40, ...)",
    )
    parser.add_argument("--inflate", type=float, default=1.3)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--placement", choices=("fgd", "bestfit"), default="fgd")
    parser.add_argument("--batch", type=int, default=1, help="arrivals per cycle")
    parser.add_argument("--jobs", type=int, default=1, help="seeds run in parallel")
    args = parser.parse_args()
    if args.batch < 1:
        parser.error(f"--batch must be 1 or more, got {args.batch}")
    args.nodes = args.nodes or args.traces / NODES
    lists = [
        p if p.suffix == ".csv" else args.traces / f"openb_pod_list_{p}.csv"
        for p in map(Path, args.pods)
    ]
    for path in (args.nodes, *lists):
        if not path.exists():
            parser.error(f"no such trace file: {path}")
    pool = ProcessPoolExecutor(args.jobs) if args.jobs > 1 else None
    try:
        for path in lists:
            print(json.dumps(measure(args, path, pool)), flush=True)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


if __name__ == "__main__":
    main()
