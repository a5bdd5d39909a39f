"""Benchmark the cluster dashboard and the GPU grid through the Django test client.

Seeds a scratch SQLite database: the demo scenario, 10,000 jobs (bulk_create), live pods on
the demo nodes, 24 hours of per-minute usage samples for the 3 demo quotas, and the openb
node list (1,213 nodes, 6,212 GPUs, when the traces are present) for the grid. Prints one
JSON object with median/p95 per page, queries per request and response sizes.

    .venv/bin/python bench/dashboard.py [--requests 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import OPENB_TRACES, p95  # noqa: E402

START = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


def setup(db_path: str) -> None:
    """Point Django at a scratch database and create its tables."""
    os.environ["SQLITE_PATH"] = db_path
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.test")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def seed(jobs: int) -> dict[str, int]:
    """Demo scenario plus bulk data; returns what was written."""
    import random

    from django.contrib.auth import get_user_model

    from cluster.models import Node
    from cluster.services import nodes_import
    from console.demo import seed_demo
    from jobs.choices import Kind, PodStatus, Status
    from jobs.models import Pod, UsageSample, Workload

    rng = random.Random(7)
    demo = seed_demo()
    owner = get_user_model().objects.get(username="bob")
    teams = [
        (demo.workspaces["workspace_a"], demo.quotas["Quota 1"]),
        (demo.workspaces["workspace_b"], demo.quotas["Quota 1.1"]),
        (demo.workspaces["workspace_c"], demo.quotas["Quota 1.2"]),
    ]
    statuses = [Status.SUCCEEDED] * 6 + [Status.FAILED, Status.QUEUED, Status.RUNNING]
    workloads = []
    for i in range(jobs):
        ws, quota = teams[i % 3]
        workloads.append(
            Workload(
                workspace=ws,
                quota=quota,
                owner=owner,
                name=f"bench-{i:05d}",
                kind=Kind.TRAINING,
                status=rng.choice(statuses),
                gpu=rng.choice((500, 1000, 1000, 2000)),
                replicas=1,
                submitted_at=START + timedelta(seconds=i * 8),
            )
        )
    Workload.objects.bulk_create(workloads, batch_size=2000)

    if (OPENB_TRACES / "openb_node_list_gpu_node.csv").exists():
        text = (OPENB_TRACES / "openb_node_list_gpu_node.csv").read_text()
        nodes_import(resource_pool=demo.resource_pool, text=text)
    nodes = list(Node.objects.values_list("pk", "gpus"))
    running = list(
        Workload.objects.filter(status=Status.RUNNING).values_list("pk", "gpu")[: len(nodes)]
    )
    pods = []
    for (workload_id, gpu), (node_id, gpus) in zip(running, nodes, strict=False):
        count = max(1, min(gpus, gpu // 1000))
        pods.append(
            Pod(
                workload_id=workload_id,
                index=0,
                node_id=node_id,
                devices=list(range(count)),
                borrowed=rng.random() < 0.2,
                status=PodStatus.RUNNING,
                created_at=START,
            )
        )
    Pod.objects.bulk_create(pods, batch_size=2000)

    rows = []
    end = START + timedelta(hours=24)
    for minute in range(24 * 60):
        at = end - timedelta(minutes=24 * 60 - 1 - minute)
        day = 8 <= at.hour < 22
        for name, quota in demo.quotas.items():
            if name == "Quota 1":
                in_quota, borrowed = (64000 if day else 8000), 0
            else:
                in_quota = (32000 if day else 48000) + rng.randrange(0, 8) * 1000
                borrowed = 0 if day else rng.randrange(0, 16) * 1000
            rows.append(
                UsageSample(
                    at=at,
                    quota=quota,
                    gpu_in_quota=in_quota,
                    gpu_borrowed=borrowed,
                    gpu_pending=rng.randrange(0, 40) * 1000,
                    preemptions=1 if rng.random() < 0.02 else 0,
                )
            )
    UsageSample.objects.bulk_create(rows, batch_size=5000)
    return {
        "jobs": Workload.objects.count(),
        "pods": len(pods),
        "samples": len(rows),
        "nodes": len(nodes),
        "gpus": sum(g for _, g in nodes),
    }


def measure(client: object, url: str, requests: int) -> dict[str, float | int]:
    """Median and p95 wall time of `requests` GETs, after one warm-up."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)  # type: ignore[attr-defined]
    assert response.status_code == 200, (url, response.status_code)
    queries = len(captured)  # now: later requests clear the connection's query log
    times = []
    for _ in range(requests):
        t0 = time.perf_counter()
        client.get(url)  # type: ignore[attr-defined]
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 1),
        "p95_ms": round(p95(times), 1),
        "queries": queries,
        "bytes": len(response.content),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup(str(Path(tmp) / "bench.sqlite3"))
        from django.contrib.auth import get_user_model
        from django.test import Client

        t0 = time.perf_counter()
        seeded = seed(args.jobs)
        seed_s = time.perf_counter() - t0
        client = Client()
        client.force_login(get_user_model().objects.get(username="admin"))
        result = {
            "seeded": seeded,
            "seed_s": round(seed_s, 2),
            "requests": args.requests,
            "dashboard": measure(client, "/dashboard/", args.requests),
            "nodes_grid": measure(client, "/nodes/grid/", args.requests),
            "goal_median_ms": 200,
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
