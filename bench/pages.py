"""Benchmark the jobs list page: 10,000 jobs in a scratch SQLite database; prints one JSON object.

    .venv/bin/python bench/pages.py [--jobs 10000] [--requests 30]

Seeds the demo, then bulk-inserts training jobs (with pods for the running ones) into workspace_b,
and times GET /workspaces/workspace_b/jobs/ through the Django test client as bob: the default
view, a sorted view, a filtered view and the last page. The goal is a median under 200 ms.
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

from bench import p95  # noqa: E402


def _setup(path: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings.test"
    os.environ["SQLITE_PATH"] = path
    os.environ.setdefault("TIDEPOOL_RUNNER", "off")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _seed(count: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from console.demo import seed_demo
    from jobs.choices import IdlePolicy, Kind, PodStatus, Status
    from jobs.models import Pod, Workload

    demo = seed_demo()
    bob = get_user_model().objects.get(username="bob")
    ws = demo.workspaces["workspace_b"]
    quota = demo.quotas["Quota 1.1"]
    nodes = list(demo.node_pool.nodes.all())
    start = datetime(2026, 12, 1, tzinfo=UTC)
    statuses = [Status.SUCCEEDED] * 6 + [Status.RUNNING, Status.QUEUED, Status.FAILED]
    with transaction.atomic():
        jobs = Workload.objects.bulk_create(
            (
                Workload(
                    workspace=ws,
                    quota=quota,
                    owner=bob,
                    name=f"bench-{i:05d}",
                    kind=Kind.TRAINING,
                    status=statuses[i % len(statuses)],
                    in_quota=(i % 3 != 0)
                    if statuses[i % len(statuses)] == Status.RUNNING
                    else None,
                    replicas=1 + i % 4,
                    gpu=8000,
                    priority=1 + i % 9,
                    idle_policy=IdlePolicy.ACCEPTABLE,
                    total_work=3600.0 * 8,
                    progress=float(i % 100) * 288,
                    restarts=i % 3,
                    submitted_at=start + timedelta(seconds=30 * i),
                )
                for i in range(count)
            ),
            batch_size=1000,
        )
        pods = []
        for i, job in enumerate(jobs):
            live = job.status == Status.RUNNING
            for r in range(job.replicas):
                pods.append(
                    Pod(
                        workload=job,
                        index=r,
                        node=nodes[(i + r) % len(nodes)],
                        status=PodStatus.RUNNING if live else PodStatus.SUCCEEDED,
                        borrowed=live and not job.in_quota,
                        created_at=job.submitted_at,
                    )
                )
        Pod.objects.bulk_create(pods, batch_size=2000)


def _time(client: object, url: str, params: dict[str, str], requests: int) -> dict[str, float]:
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    get = client.get  # type: ignore[attr-defined]
    assert get(url, params).status_code == 200  # warm caches and templates
    times = []
    for _ in range(requests):
        began = time.perf_counter()
        response = get(url, params)
        times.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200
    reset_queries()
    with CaptureQueriesContext(connection) as captured:
        get(url, params)
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 1),
        "p95_ms": round(p95(times), 1),
        "queries": len(captured),
    }


def main() -> None:
    """Seed, time, print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        _setup(str(Path(scratch) / "bench.sqlite3"))
        began = time.perf_counter()
        _seed(args.jobs)
        seeded = time.perf_counter() - began

        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.test.utils import setup_test_environment

        setup_test_environment()
        client = Client()
        client.force_login(get_user_model().objects.get(username="bob"))
        url = "/workspaces/workspace_b/jobs/"
        views = {
            "default": {},
            "sorted_by_progress": {"sort": "-progress"},
            "filtered_running_not_in_quota": {"status": "Running", "quota": "not"},
            "last_page": {"page": str((args.jobs + 49) // 50)},
        }
        results = {
            name: _time(client, url, params, args.requests) for name, params in views.items()
        }
        print(
            json.dumps(
                {
                    "bench": "jobs_list_page",
                    "jobs": args.jobs,
                    "requests": args.requests,
                    "seed_seconds": round(seeded, 1),
                    "median_ms": results["default"]["median_ms"],
                    "p95_ms": results["default"]["p95_ms"],
                    "views": results,
                    "goal_median_ms": 200,
                }
            )
        )


if __name__ == "__main__":
    main()
