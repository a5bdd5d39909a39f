"""How long each writer holds the SQLite write lock while bench/api.py runs; prints JSON.

    .venv/bin/python bench/lock_holds.py [--runs 3] [bench/api.py's options]

Runs bench/api.py with its server's writer lock traced (bench/lock_trace/sitecustomize.py)
and reports, per holder, the hold times (ms) during the submit phase (first to last API
write): the control loop's tasks by name, and ``submit`` for POST /api/v1/jobs/. Submits
queue behind every hold, so long ones show up in the submit p95. Tracing costs a little,
so the submit figures are also printed for what they were under it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import p95  # noqa: E402


def holds(trace: Path) -> dict[str, list[float]]:
    """Hold times by holder within the submit phase of one traced run."""
    rows = [line.split() for line in trace.read_text().splitlines()]
    writes = [float(at) for at, label, _ in rows if label.startswith("http-write")]
    found: dict[str, list[float]] = defaultdict(list)
    for at, label, held in rows:
        if min(writes) <= float(at) <= max(writes):
            found["submit" if label.startswith("http-write") else label].append(float(held))
    return found


def summary(samples: list[float]) -> dict[str, float]:
    """Count, median, p95 and max of hold times."""
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(p95(ordered), 2),
        "max_ms": round(ordered[-1], 2),
        "total_ms": round(sum(ordered), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args, passed = parser.parse_known_args()
    found: dict[str, list[float]] = defaultdict(list)
    submits = []
    with tempfile.TemporaryDirectory(prefix="tidepool-lock-holds-") as scratch:
        for run in range(args.runs):
            trace = Path(scratch) / f"run{run}.txt"
            env = {
                **os.environ,
                "LOCKTRACE_OUT": str(trace),
                "PYTHONPATH": os.pathsep.join(
                    [str(ROOT / "bench" / "lock_trace"), os.environ.get("PYTHONPATH", "")]
                ),
            }
            out = subprocess.run(
                [sys.executable, str(ROOT / "bench" / "api.py"), *passed],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            submits.append(json.loads(out.splitlines()[-1])["submit_job"])
            for label, held in holds(trace).items():
                found[label] += held
    print(
        json.dumps(
            {
                "runs": args.runs,
                "holds_during_submits": {k: summary(v) for k, v in sorted(found.items())},
                "submit_median_ms_traced": [s["median_ms"] for s in submits],
                "submit_p95_ms_traced": [s["p95_ms"] for s in submits],
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
