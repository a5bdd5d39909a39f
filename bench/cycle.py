"""Benchmark one full scheduling cycle on synthetic clusters; prints one JSON object."""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import OPENB_TRACES, isolated  # noqa: E402
from jobs.scheduling._loader import load  # noqa: E402

COMPILED = load() == "compiled"  # before the core's modules are imported
from jobs.scheduling.cycle import run_cycle  # noqa: E402
from jobs.scheduling.types import (  # noqa: E402
    MILLI,
    CycleResult,
    Node,
    Placement,
    Quota,
    Resources,
    Snapshot,
    Workload,
)


def openb_nodes() -> list[Node] | None:
    """The openb node list (1,213 nodes, 6,212 GPUs), when the traces are present."""
    path = OPENB_TRACES / "openb_node_list_gpu_node.csv"
    if not path.exists():
        return None
    with path.open() as fh:
        return [
            Node(r["sn"], r["model"], int(r["gpu"]), int(r["cpu_milli"]), int(r["memory_mib"]))
            for r in csv.DictReader(fh)
        ]


def uniform_nodes(count: int, gpus: int, pool: str = "A100") -> list[Node]:
    """count identical nodes."""
    return [Node(f"node-{i:05}", pool, gpus, 128_000, 1_048_576) for i in range(count)]


def quota_tree(nodes: list[Node], departments: int, teams: int) -> list[Quota]:
    """One root holding every pool, departments with child preemption, teams below."""
    caps: dict[str, int] = {}
    for n in nodes:
        caps[n.pool] = caps.get(n.pool, 0) + n.gpus * MILLI
    quotas = [Quota("cluster", None, {p: Resources(c) for p, c in caps.items()})]
    for d in range(departments):
        dmin = {p: Resources(c // departments // MILLI * MILLI) for p, c in caps.items()}
        quotas.append(Quota(f"dept{d}", "cluster", dmin, child_preemption=True))
        for t in range(teams):
            tmin = {p: Resources(r.gpu // teams // MILLI * MILLI) for p, r in dmin.items()}
            quotas.append(Quota(f"dept{d}.team{t}", f"dept{d}", tmin, weight=float(1 + (t % 3))))
    return quotas


SIZES_A = (0, 0, 250, 500, 500, 1000, 1000, 2000)
SIZES_B = (0, 100, 100, 200, 250, 250, 250, 500, 1000)


class Filler:
    """First-fit filler that builds a valid running set with explicit devices."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.dev = {n.name: [MILLI] * n.gpus for n in nodes}
        self.cpu = {n.name: n.cpu for n in nodes}
        self.mem = {n.name: n.memory for n in nodes}
        self.by_pool: dict[str, list[Node]] = {}
        for n in nodes:
            self.by_pool.setdefault(n.pool, []).append(n)
        self.cursor = dict.fromkeys(self.by_pool, 0)

    def place(self, pool: str, req: Resources) -> Placement | None:
        """Place one replica near the pool's cursor, or None when the pool looks full."""
        ring = self.by_pool[pool]
        start = self.cursor[pool]
        for step in range(min(len(ring), 64)):
            n = ring[(start + step) % len(ring)]
            dv = self._devices(n.name, req.gpu)
            if dv is None or self.cpu[n.name] < req.cpu or self.mem[n.name] < req.memory:
                continue
            share = min(req.gpu, MILLI)
            for i in dv:
                self.dev[n.name][i] -= share
            self.cpu[n.name] -= req.cpu
            self.mem[n.name] -= req.memory
            self.cursor[pool] = (start + step) % len(ring)
            return Placement(n.name, dv)
        self.cursor[pool] = (start + 64) % len(ring)
        return None

    def _devices(self, node: str, gpu: int) -> tuple[int, ...] | None:
        dev = self.dev[node]
        if gpu == 0:
            return ()
        if gpu < MILLI:
            for i, d in enumerate(dev):
                if d >= gpu:
                    return (i,)
            return None
        full = [i for i, d in enumerate(dev) if d == MILLI]
        need = gpu // MILLI
        return tuple(full[:need]) if len(full) >= need else None


def build(
    nodes: list[Node],
    running: int,
    pending: int,
    sizes: tuple[int, ...],
    seed: int,
    calm: bool = False,
) -> Snapshot:
    """A snapshot with `running` placed workloads and `pending` queued ones.

    storm (default): random priorities everywhere, so pending work evicts a lot.
    calm: a steady cluster; the running set leaves ~15% of the GPUs free, every job has the
    same priority and pending work goes to the teams only, so it mostly fits or waits and
    only the odd reclaim of borrowed capacity preempts anyone.
    """
    rng = random.Random(seed)
    fill_limit = sum(n.gpus for n in nodes) * MILLI * (85 if calm else 100) // 100
    used = 0
    quotas = quota_tree(nodes, 8, 4)
    leaves = [q.name for q in quotas if q.name.count(".") == 1]
    depts = [q.name for q in quotas if q.name.startswith("dept") and "." not in q.name]
    pools = sorted({n.pool for n in nodes})
    weights = [sum(n.gpus for n in nodes if n.pool == p) + 1 for p in pools]
    filler = Filler(nodes)
    workloads: list[Workload] = []
    attempts = 0
    while len(workloads) < running and attempts < running * 3:
        attempts += 1
        gpu = rng.choice(sizes)
        pool = rng.choices(pools, weights)[0]
        req = Resources(gpu, rng.choice((500, 1000, 2000, 4000)), rng.choice((1024, 4096, 8192)))
        if used + gpu > fill_limit:
            break
        kind = rng.choices(("training", "inference", "interactive"), (8, 3, 1))[0]
        replicas = 2 if kind == "training" and gpu == 8000 and rng.random() < 0.3 else 1
        placed = [filler.place(pool, req) for _ in range(replicas)]
        if any(p is None for p in placed):
            continue
        i = len(workloads)
        used += gpu * replicas
        started = float(rng.randint(0, 900))
        workloads.append(
            Workload(
                f"run-{i:06}",
                rng.choice(leaves),
                kind,
                replicas,
                req,
                (pool,),
                priority=5 if calm else rng.randint(1, 9),
                idle=rng.choice(("none", "acceptable", "acceptable", "idle_only")),
                running=tuple(p for p in placed if p is not None),
                submitted_at=started - 5,
                started_at=started,
                last_checkpoint_at=started + rng.randint(0, 90),
            )
        )
    for i in range(pending):
        gpu = rng.choice(sizes)
        kind = rng.choices(("training", "inference", "interactive"), (8, 3, 1))[0]
        to_dept = not calm and kind == "inference" and rng.random() < 0.5
        quota = rng.choice(depts) if to_dept else rng.choice(leaves)
        workloads.append(
            Workload(
                f"pend-{i:06}",
                quota,
                kind,
                rng.choice((1, 1, 1, 2)) if gpu >= MILLI else 1,
                Resources(gpu, rng.choice((500, 1000, 2000)), rng.choice((1024, 4096))),
                (rng.choices(pools, weights)[0],),
                priority=5 if calm else rng.randint(1, 9),
                idle=rng.choice(("none", "acceptable", "idle_only")),
                submitted_at=float(1000 + i),
            )
        )
    return Snapshot(1000.0, tuple(nodes), tuple(quotas), tuple(workloads), "tree")


def digest(result: CycleResult) -> str:
    """A short hash of every decision of a cycle, to check that a change keeps them all."""
    text = repr(
        (
            result.admitted,
            result.preempted,
            sorted(result.classification.items()),
            result.pending,
            sorted(result.stats.items()),
        )
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def measure(snap: Snapshot, runs: int) -> dict[str, object]:
    """Median and max wall time of run_cycle, peak traced memory of one more run.

    max_rss_mib is the process's high-water mark so far (snapshots included), so it only
    grows from one scenario to the next.
    """
    times = []
    result = None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = run_cycle(snap)
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    run_cycle(snap)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result is not None
    running = sum(1 for w in snap.workloads if w.running)
    return {
        "nodes": len(snap.nodes),
        "gpus": sum(n.gpus for n in snap.nodes),
        "running": running,
        "pending": len(snap.workloads) - running,
        "median_s": round(statistics.median(times), 4),
        "max_s": round(max(times), 4),
        "peak_traced_mib": round(peak / 2**20, 1),
        "admitted": len(result.admitted),
        "preempted": len(result.preempted),
        "still_pending": len(result.pending),
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "digest": digest(result),
    }


def side_by_side(other: Path, rounds: int, argv: list[str]) -> dict[str, object]:
    """The same run in `other`'s checkout and in this one, each in its own process, taking
    turns `rounds` times so that a machine slowing down or speeding up weighs on both alike.
    Per scenario: the median over the rounds of each side's median time, and their ratio
    (this / other) with the lowest and highest ratio of a single round."""
    rest: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--against", "--rounds"):
            skip = True
        else:
            rest.append(a)
    runs: dict[str, list[dict[str, object]]] = {"against": [], "this": []}
    for _ in range(rounds):
        for label, cwd in (("against", other), ("this", REPO)):
            done = subprocess.run(
                isolated("bench/cycle.py", *rest),
                cwd=cwd,
                capture_output=True,
                text=True,
                check=True,
            )
            runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    scenarios = [k for k, v in runs["this"][0].items() if isinstance(v, dict)]
    out: dict[str, object] = {"against": str(other), "rounds": rounds}
    for label, got in runs.items():
        # the last run's figures, with the median time over all rounds
        out[label] = {
            k: {**_scenario(got[-1], k), "median_s": _median_of(got, k)} for k in scenarios
        }
    ratios: dict[str, object] = {}
    for k in scenarios:
        each = [
            _median_of([t], k) / _median_of([a], k)
            for a, t in zip(runs["against"], runs["this"], strict=True)
        ]
        ratios[k] = {
            "ratio": round(_median_of(runs["this"], k) / _median_of(runs["against"], k), 3),
            "lowest": round(min(each), 3),
            "highest": round(max(each), 3),
        }
    out["median_ratio_this_over_against"] = ratios
    return out


def _scenario(run: dict[str, object], name: str) -> dict[str, object]:
    """One scenario's figures in a run's output."""
    got = run[name]
    assert isinstance(got, dict)
    return got


def _median_of(runs: list[dict[str, object]], scenario: str) -> float:
    """The median over runs of one scenario's median time."""
    times = [_scenario(r, scenario)["median_s"] for r in runs]
    return statistics.median(t for t in times if isinstance(t, float))


def main() -> None:
    """Run scenarios (a) and (b), calm and storm, or a small smoke run with --quick."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=("a", "b"))
    parser.add_argument("--mode", choices=("calm", "storm"))
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout (e.g. main): run the same scenarios there too, print both",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="with --against: turns each checkout takes"
    )
    args = parser.parse_args()
    if args.against is not None:
        if args.rounds < 1:
            parser.error(f"--rounds must be 1 or more, got {args.rounds}")
        print(json.dumps(side_by_side(args.against, args.rounds, sys.argv[1:])))
        return
    out: dict[str, object] = {"core": "compiled" if COMPILED else "pure"}
    modes = [m for m in ("calm", "storm") if args.mode in (None, m)]
    if args.quick:
        for m in modes:
            snap = build(uniform_nodes(50, 8), 300, 100, SIZES_A, 1, m == "calm")
            out[f"quick_{m}"] = measure(snap, 2)
    else:
        for m in modes:
            if args.only in (None, "a"):
                nodes_a = openb_nodes() or uniform_nodes(1213, 5)
                snap = build(nodes_a, 8000, 2000, SIZES_A, 1, m == "calm")
                out[f"a_{m}"] = measure(snap, args.runs)
            if args.only in (None, "b"):
                snap = build(uniform_nodes(4000, 8), 140_000, 5000, SIZES_B, 2, m == "calm")
                out[f"b_{m}"] = measure(snap, args.runs)
            del snap
    out["max_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
