"""Does a cycle settle? Run scenario (a) of bench/cycle.py, apply its decisions, and run a
second cycle with no arrivals and no departures; prints one JSON object.

    .venv/bin/python bench/settle.py [--seeds 10]

A second cycle that preempts again shows work the first one left undone. `churn` counts its
evictions of workloads the first cycle started: a job started and evicted a minute later,
which users notice most. Figures are sums over seeds, by preemption reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cycle import SIZES_A, build, openb_nodes, uniform_nodes  # noqa: E402
from jobs.scheduling._loader import load  # noqa: E402

COMPILED = load() == "compiled"  # before the core's modules are imported
from jobs.scheduling.cycle import run_cycle  # noqa: E402
from jobs.scheduling.types import CycleResult, Snapshot, Workload  # noqa: E402

TICK = 60.0
# a core that takes each running workload's label (the database's), as the control loop
# passes it; an older core recomputes the labels
LABELS = "in_quota" in {f.name for f in fields(Workload)}


def applied(snap: Snapshot, result: CycleResult) -> Snapshot:
    """The snapshot a tick later: victims back in the queue, admissions running."""
    started = {a.workload: a.placements for a in result.admitted}
    evicted = {p.workload for p in result.preempted}
    workloads = []
    for w in snap.workloads:
        if w.name in evicted:
            w = replace(w, running=(), started_at=None)
        if w.name in started:
            w = replace(w, running=w.running + started[w.name], started_at=snap.now)
        if LABELS:
            w = replace(w, in_quota=result.classification.get(w.name) if w.running else None)
        workloads.append(w)
    return replace(snap, now=snap.now + TICK, workloads=tuple(workloads))


def settle(seeds: int, calm: bool) -> dict[str, object]:
    """Both cycles' figures, summed over seeds."""
    nodes = openb_nodes() or uniform_nodes(1213, 5)
    first: Counter[str] = Counter()
    second: Counter[str] = Counter()
    churn: Counter[str] = Counter()
    for seed in range(seeds):
        snap = build(nodes, 8000, 2000, SIZES_A, seed, calm)
        one = run_cycle(snap)
        two = run_cycle(applied(snap, one))
        first.update(admitted=len(one.admitted), preempted=len(one.preempted))
        started = {a.workload for a in one.admitted}
        second.update(p.reason for p in two.preempted)
        churn.update(p.reason for p in two.preempted if p.workload in started)
    return {
        "first_cycle": dict(first),
        "second_cycle_preempted": dict(second),
        "churn": dict(churn),
    }


def main() -> None:
    """Calm and storm, as bench/cycle.py builds them."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    out: dict[str, object] = {"core": "compiled" if COMPILED else "pure", "seeds": args.seeds}
    for mode in ("calm", "storm"):
        out[mode] = settle(args.seeds, mode == "calm")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
