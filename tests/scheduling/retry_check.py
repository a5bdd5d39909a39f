"""Run with the pure core (TIDEPOOL_PURE_CORE=1): every retry that a cycle answers from an
earlier round's attempt is attempted again for real, and must end the same way.

Prints {"reused": how many answers were checked, "mismatches": the ones that differ} as JSON
after cycles on seeded random clusters: two pools, contended quotas, calm and storm, pending
work that accepts one or both pools, one root or two, both idle scopes and both placements.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace

from bench.cycle import build
from jobs.scheduling import cycle
from jobs.scheduling.cycle import Outcome
from jobs.scheduling.types import Node, Resources, Snapshot, Workload

SIZES = ((0, 250, 500, 1000, 1000, 2000, 4000), (0, 100, 250, 250, 500, 1000))
_attempt = cycle.Cycle.attempt
reused = 0
mismatches: list[str] = []


def checked_attempt(self: cycle.Cycle, w: Workload, count: int, stage: int) -> Outcome:
    """The cycle's attempt; when it answers from an earlier round, the real one beside it."""
    global reused
    last = self.tried.get((w.name, stage, self.enforce_shares))
    out = _attempt(self, w, count, stage)
    if last is None or out is not last[3]:
        return out
    reused += 1
    changed, failures = dict(self.state.changed), self.failures
    self.failures = {}  # a full search, not one cut short by an earlier failure
    real = self._try(w, count, stage)  # a failed attempt leaves the state as it was
    self.state.changed.update(changed)
    self.failures = failures
    if real.placed is not None or (real.reason, real.fair_blocked) != (
        out.reason,
        out.fair_blocked,
    ):
        mismatches.append(f"{w.name} stage {stage}: {real.placed} {real.reason!r} {out.reason!r}")
    return out


def cluster(seed: int) -> Snapshot:
    """A small contended cluster of two pools with its running and pending work."""
    rng = random.Random(seed)
    nodes = [Node(f"a{i:03}", "a100", 8, 96_000, 786_432) for i in range(rng.choice((8, 16)))]
    nodes += [Node(f"h{i:03}", "h100", rng.choice((4, 8)), 64_000, 524_288) for i in range(8)]
    running, pending, sizes = rng.choice((60, 120)), rng.choice((40, 90)), rng.choice(SIZES)
    if seed % 3 == 0:  # calm: one priority, pending work in the teams only
        running, pending, sizes = 80, 60, SIZES[0]
    snap = build(nodes, running, pending, sizes, seed, calm=seed % 3 == 0)
    workloads = list(snap.workloads)
    for i, w in enumerate(workloads):
        if not w.running and seed % 2 and rng.random() < 0.5:
            workloads[i] = replace(w, pools=("a100", "h100"))
    quotas = list(snap.quotas)
    if seed % 4 == 1:  # dept0 leaves the tree: a second root, with the min it had
        at = next(i for i, q in enumerate(quotas) if q.name == "dept0")
        dept = quotas[at]
        quotas[at] = replace(dept, parent=None)
        root = quotas[0]
        left = {p: Resources(r.gpu - dept.min[p].gpu) for p, r in root.min.items()}
        quotas[0] = replace(root, min=left)
    return replace(
        snap,
        workloads=tuple(workloads),
        quotas=tuple(quotas),
        idle_scope=("tree", "pool")[seed % 2],
        placement=("fgd", "bestfit")[seed % 5 == 4],
    )


def main(seeds: int) -> None:
    cycle.Cycle.attempt = checked_attempt  # type: ignore[method-assign]
    for seed in range(seeds):
        cycle.run_cycle(cluster(seed))
    print(json.dumps({"reused": reused, "mismatches": mismatches[:10]}))


if __name__ == "__main__":
    main(int(sys.argv[1]))
