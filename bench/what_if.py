"""A what-if replay of the recorded demo cluster: wall time of both runs, and fidelity.

Records `--days` of the demo (bench/day_night.py's loop, whatif.history) into a scratch
SQLite database, or reuses `--db` if it already holds a recording, then replays the window
as configured and with `--changes` (the what-if JSON list), and prints the wall time of the
replay (both runs), of each run, and the baseline's fidelity against the recorded samples.

    python bench/what_if.py --days 7 [--db /tmp/whatif7.sqlite3] [--skip-quiet]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.day_night import START, setup  # noqa: E402

DEFAULT_CHANGES = '[{"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 1.1", "gpus": 8}]'


def main() -> None:
    """Record (unless the database has a recording), then time one what-if."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=float, default=7)
    parser.add_argument("--db", default="")
    parser.add_argument("--changes", default=DEFAULT_CHANGES)
    parser.add_argument(
        "--skip-quiet", action="store_true", help="skip cycles whose inputs did not change"
    )
    args = parser.parse_args()
    db = args.db or str(Path(os.environ.get("TMPDIR", "/tmp")) / f"whatif-{args.days:g}d.sqlite3")
    setup(db)
    from jobs.models import UsageSample
    from whatif.changes import validate_changes
    from whatif.history import demo_history_record
    from whatif.recording import record_window
    from whatif.replay.apply import baseline
    from whatif.replay.compare import run_once, what_if

    end = START + timedelta(days=args.days)
    recorded = 0.0
    if not UsageSample.objects.filter(at__gte=end).exists():
        t0 = time.perf_counter()
        demo_history_record(start=START, hours=args.days * 24)
        recorded = time.perf_counter() - t0
    t0 = time.perf_counter()
    rec = record_window(START, end)
    read = time.perf_counter() - t0
    changes = validate_changes(args.changes)
    skip = args.skip_quiet
    t0 = time.perf_counter()
    result = what_if(rec, changes, skip_quiet=skip)
    wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_once(rec, baseline(rec), skip_quiet=skip)
    one = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "days": args.days,
                "arrivals": len(rec.arrivals),
                "record_history_s": round(recorded, 1),
                "read_window_s": round(read, 2),
                "what_if_wall_s": round(wall, 2),
                "one_run_s": round(one, 2),
                "cycles": result["cycles"],
                "fidelity": result["fidelity"],
                "cluster": result["cluster"],
                "quota_1_1_p95_wait_min": {
                    k: v["wait_p95_min"] for k, v in result["quotas"]["Quota 1.1"].items()
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
