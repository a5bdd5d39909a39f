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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import OPENB_TRACES, isolated_code  # noqa: E402
from jobs.scheduling._loader import load  # noqa: E402

COMPILED = load() == "compiled"  # before the core's modules are imported
from jobs.scheduling.cycle import run_cycle  # noqa: E402
from jobs.scheduling.fragmentation import popular_shapes  # noqa: E402
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


@dataclass(frozen=True)
class Scenario:
    """A synthetic cluster: its nodes ("openb", or (count, GPUs each)), running and pending
    workloads, request sizes and seed."""

    nodes: str | tuple[int, int]
    running: int
    pending: int
    sizes: tuple[int, ...]
    seed: int


# "a" falls back to 1,213 uniform nodes where the openb traces are absent
SCENARIOS = {
    "quick": Scenario((50, 8), 300, 100, SIZES_A, 1),
    "a": Scenario("openb", 8000, 2000, SIZES_A, 1),
    "b": Scenario((4000, 8), 140_000, 5000, SIZES_B, 2),
}

# One side of a side-by-side run, started in a checkout with that checkout's modules: it builds
# the scenario with its own bench/cycle.py, prints the warm-up cycle's decisions, then runs one
# cycle per line read and prints its seconds.
SERVE = """
import json, sys, time
from bench import cycle as c
spec = json.loads(sys.argv[1])
n = spec["nodes"]
nodes = (c.openb_nodes() or c.uniform_nodes(1213, 5)) if n == "openb" else c.uniform_nodes(*n)
snap = c.build(nodes, spec["running"], spec["pending"], tuple(spec["sizes"]), spec["seed"],
               spec["calm"])
r = c.run_cycle(snap)
print(json.dumps({"admitted": len(r.admitted), "preempted": len(r.preempted),
                  "digest": c.digest(r)}), flush=True)
for _ in sys.stdin:
    t0 = time.perf_counter()
    c.run_cycle(snap)
    print(time.perf_counter() - t0, flush=True)
"""


def scenario(name: str, calm: bool) -> Snapshot:
    """The snapshot of a named scenario."""
    sc = SCENARIOS[name]
    if isinstance(sc.nodes, str):
        nodes = openb_nodes() or uniform_nodes(1213, 5)
    else:
        nodes = uniform_nodes(*sc.nodes)
    return build(nodes, sc.running, sc.pending, sc.sizes, sc.seed, calm)


class _Side:
    """A checkout's server for one scenario."""

    def __init__(self, checkout: Path, spec: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            isolated_code(SERVE, json.dumps(spec)),
            cwd=checkout,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.decisions: dict[str, object] = json.loads(self._line())
        self.times: list[float] = []

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            assert self.proc.stderr is not None
            raise RuntimeError(f"a bench server failed:\n{self.proc.stderr.read()}")
        return line

    def run(self) -> None:
        """Time one cycle."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        self.times.append(float(self._line()))

    def close(self) -> None:
        """End the server."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def side_by_side(other: Path, names: list[tuple[str, bool]], runs: int) -> dict[str, object]:
    """Each scenario in `other`'s checkout and in this one, one server process each, cycles
    taking turns (the order flipped every pair), so that a machine slowing down or speeding up
    weighs on both alike. Per scenario: each side's median, their ratio (this / other), the
    quartiles of the pairs' ratios, and each side's decisions."""
    out: dict[str, object] = {"against": str(other), "runs": runs}
    for name, calm in names:
        spec = {**asdict(SCENARIOS[name]), "calm": calm}
        sides = {"against": _Side(other, spec), "this": _Side(REPO, spec)}
        try:
            for i in range(runs):
                order = ("against", "this") if i % 2 == 0 else ("this", "against")
                for label in order:
                    sides[label].run()
        finally:
            for side in sides.values():
                side.close()
        a, t = sides["against"], sides["this"]
        pairs = [y / x for x, y in zip(a.times, t.times, strict=True)]
        q1, _, q3 = statistics.quantiles(pairs, n=4) if runs > 1 else (pairs[0],) * 3
        out[f"{name}_{'calm' if calm else 'storm'}"] = {
            "against_median_s": round(statistics.median(a.times), 4),
            "this_median_s": round(statistics.median(t.times), 4),
            "ratio": round(statistics.median(t.times) / statistics.median(a.times), 3),
            "pair_ratio_q1_q3": [round(q1, 3), round(q3, 3)],
            "against": a.decisions,
            "this": t.decisions,
        }
    return out


def drift(snap: Snapshot, runs: int) -> dict[str, object]:
    """Cycles under a learned target that holds from one cycle to the next, then under one
    that changes at every cycle (the scenario's submissions, and one more job of the most
    popular shape every other cycle), then held again: what learning the target anew at each
    cycle would cost, as the scorer ranks under it and starts over when it changes
    (jobs.bridge.snapshot.target_cutoff)."""
    rows = [(w.request.gpu, w.request.cpu, w.request.memory, w.replicas) for w in snap.workloads]
    held = replace(snap, target=popular_shapes(rows))
    top = held.target[0]  # one more job of the most popular shape
    one_more = (top.count * top.share, top.cpu, top.mem, 1)
    moved = replace(snap, target=popular_shapes([*rows, one_more]))
    assert moved.target != held.target

    def timed(snapshots: list[Snapshot]) -> list[float]:
        times = []
        for s in snapshots:
            t0 = time.perf_counter()
            run_cycle(s)
            times.append(time.perf_counter() - t0)
        return times

    run_cycle(held)
    steady = timed([held] * runs)
    changing = timed([moved if i % 2 == 0 else held for i in range(runs)])
    steady += timed([held] * runs)[1:]  # the first one starts the scorer over
    return {
        "held_median_s": round(statistics.median(steady), 4),
        "changing_median_s": round(statistics.median(changing), 4),
        "ratio": round(statistics.median(changing) / statistics.median(steady), 3),
    }


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
        help="another checkout (e.g. main): time the same scenarios there, taking turns",
    )
    parser.add_argument(
        "--drift",
        action="store_true",
        help="time cycles under a target that holds, and under one that changes every cycle",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be 1 or more, got {args.runs}")
    if args.drift and args.against is not None:
        parser.error("--drift times this checkout only: leave out --against")
    modes = [m == "calm" for m in ("calm", "storm") if args.mode in (None, m)]
    kinds = ["quick"] if args.quick else [k for k in ("a", "b") if args.only in (None, k)]
    names = [(k, calm) for calm in modes for k in kinds]
    if args.against is not None:
        print(json.dumps(side_by_side(args.against, names, args.runs)))
        return
    out: dict[str, object] = {"core": "compiled" if COMPILED else "pure"}
    for k, calm in names:
        snap = scenario(k, calm)
        out[f"{k}_{'calm' if calm else 'storm'}"] = (
            drift(snap, args.runs) if args.drift else measure(snap, args.runs)
        )
    out["max_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
