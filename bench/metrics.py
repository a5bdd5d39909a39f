"""The cost of a /metrics scrape with 1,000 quotas, 10,000 jobs and 6,000 GPUs; prints JSON.

    .venv/bin/python bench/metrics.py [--scrapes 30] [--quotas 1000] [--jobs 10000]

Seeds a scratch SQLite database (bulk_create): three node pools of 250 eight-GPU nodes, a
quota tree of 10 roots × 9 children × 10 grandchildren (each quota with amounts on its root's
node pool), 10,000 training jobs (40% running on a GPU each, a tenth of those borrowed; 20%
waiting, half of them naming a node pool; the rest ended). Then GETs /metrics through the
Django test client and prints median and p95 scrape time and the series (sample lines).

"worst case" adds what a long-lived process accumulates: a submit→Running observation for
every quota, request latency on 60 routes × 2 methods, a preemption and restart on every
quota; the gauges alone are what a fresh web process answers.
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

START = datetime(2026, 12, 1, tzinfo=UTC)
POOLS = ("A100-80G", "H100", "T4")
NODES_PER_POOL = 250  # × 3 pools × 8 GPUs = 6,000 GPUs


def setup(db_path: str) -> None:
    """Point Django at a scratch database and create its tables."""
    os.environ["SQLITE_PATH"] = db_path
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.test")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def seed(quotas: int, jobs: int) -> dict[str, int]:
    """The cluster, the quota tree and the jobs; returns what was written."""
    import random

    from django.contrib.auth import get_user_model

    from cluster.models import Node, NodePool, ResourcePool
    from jobs.choices import Kind, PodStatus, Status
    from jobs.models import Pod, Workload
    from quotas.models import Quota, QuotaResource
    from workspaces.models import Workspace

    rng = random.Random(18)
    resource_pool = ResourcePool.objects.create(name="general")
    pools = [
        NodePool.objects.create(resource_pool=resource_pool, name=name, gpu_model=name)
        for name in POOLS
    ]
    nodes = Node.objects.bulk_create(
        Node(
            node_pool=pool, name=f"{pool.name.lower()}-{i:03d}", gpus=8, cpu=128_000, memory=1 << 20
        )
        for pool in pools
        for i in range(NODES_PER_POOL)
    )
    by_pool = {pool.pk: [n for n in nodes if n.node_pool_id == pool.pk] for pool in pools}

    # 10 roots × 9 children × 10 grandchildren = 1,000 quotas at the default size.
    roots_n = max(1, quotas // 100)
    made: list[tuple[Quota, NodePool, int]] = []  # quota, pool, depth
    for r in range(roots_n):
        pool = pools[r % len(pools)]
        root = Quota.objects.create(resource_pool=resource_pool, name=f"root-{r:02d}")
        made.append((root, pool, 0))
        for c in range(9):
            child = Quota.objects.create(
                resource_pool=resource_pool, parent=root, name=f"team-{r:02d}-{c}"
            )
            made.append((child, pool, 1))
            grandchildren = Quota.objects.bulk_create(
                Quota(resource_pool=resource_pool, parent=child, name=f"proj-{r:02d}-{c}-{g}")
                for g in range(10)
            )
            made += [(g, pool, 2) for g in grandchildren]
    gpus = {0: 600_000, 1: 64_000, 2: 6_000}  # milli-GPU by depth
    QuotaResource.objects.bulk_create(
        QuotaResource(
            quota=q,
            node_pool=pool,
            min_gpu=gpus[depth],
            min_cpu=gpus[depth] * 16,
            min_memory=gpus[depth] * 128,
            max_gpu=None if depth else gpus[depth] * 2,
        )
        for q, pool, depth in made
    )
    leaves = [(q, pool) for q, pool, depth in made if depth == 2]

    owner = get_user_model().objects.create_user("bench")
    workspace = Workspace.objects.create(name="bench")
    statuses = [Status.RUNNING] * 4 + [Status.QUEUED] * 2 + [Status.SUCCEEDED] * 4
    workloads = []
    for i in range(jobs):
        quota, _ = leaves[i % len(leaves)]
        status = statuses[i % len(statuses)]
        workloads.append(
            Workload(
                workspace=workspace,
                quota=quota,
                owner=owner,
                name=f"bench-{i:05d}",
                kind=Kind.TRAINING,
                status=status,
                in_quota=(i % 10 != 0) if status == Status.RUNNING else None,
                gpu=1000,
                cpu=8000,
                memory=65536,
                submitted_at=START + timedelta(seconds=i),
            )
        )
    Workload.objects.bulk_create(workloads, batch_size=2000)
    pool_of = {q.pk: pool for q, pool in leaves}
    used = {pool.pk: 0 for pool in pools}
    pods = []
    waiting = []
    for w in workloads:
        pool = pool_of[w.quota_id]
        if w.status == Status.RUNNING:
            slot = used[pool.pk]
            used[pool.pk] += 1
            node = by_pool[pool.pk][(slot // 8) % NODES_PER_POOL]
            pods.append(
                Pod(
                    workload=w,
                    index=0,
                    node=node,
                    devices=[slot % 8],
                    status=PodStatus.RUNNING,
                    borrowed=not w.in_quota,
                    created_at=START,
                )
            )
        elif w.status == Status.QUEUED and rng.random() < 0.5:
            waiting.append(Workload.node_pools.through(workload_id=w.pk, nodepool_id=pool.pk))
    Pod.objects.bulk_create(pods, batch_size=2000)
    Workload.node_pools.through.objects.bulk_create(waiting, batch_size=2000)
    return {
        "quotas": len(made),
        "jobs": jobs,
        "gpus": len(nodes) * 8,
        "nodes": len(nodes),
        "running_pods": len(pods),
    }


def accumulate(quotas: int) -> None:
    """What a long-lived process has observed: every quota in every per-quota metric."""
    from console import metrics
    from quotas.models import Quota

    for name in Quota.objects.values_list("name", flat=True)[:quotas]:
        metrics.SUBMIT_TO_RUNNING.labels(quota=name).observe(120)
        metrics.PREEMPTIONS.labels(quota=name, kind="reclaim").inc()
        metrics.PREEMPTION_LOST.labels(quota=name).inc(60)
        metrics.RESTARTS.labels(quota=name, cause="preemption").inc()
    for route in range(60):
        for method in ("GET", "POST"):
            metrics.HTTP_DURATION.labels(route=f"api/v1/route-{route}/", method=method).observe(
                0.01
            )
    for phase in ("total", "snapshot", "core", "apply"):
        metrics.CYCLE_DURATION.labels(phase=phase).observe(0.1)


def scrape(count: int) -> dict[str, float]:
    """GET /metrics `count` times; median and p95 in ms, series and bytes of the last."""
    from django.test import Client
    from django.test.utils import override_settings

    client = Client()
    times: list[float] = []
    cpu: list[float] = []
    body = b""
    with override_settings(TIDEPOOL_METRICS_OPEN="1"):
        client.get("/metrics")  # warm-up
        for _ in range(count):
            began, began_cpu = time.perf_counter(), time.process_time()
            response = client.get("/metrics")
            times.append((time.perf_counter() - began) * 1000)
            cpu.append((time.process_time() - began_cpu) * 1000)
            assert response.status_code == 200
            body = response.content
    lines = [line for line in body.decode().splitlines() if line and not line.startswith("#")]
    return {
        "median_ms": round(statistics.median(times), 1),
        "p95_ms": round(p95(times), 1),
        # CPU time of the scrape (the process's own): less at the mercy of a busy machine.
        "cpu_median_ms": round(statistics.median(cpu), 1),
        "cpu_p95_ms": round(p95(cpu), 1),
        "series": len(lines),
        "bytes": len(body),
    }


def middleware_cost(requests: int = 20_000) -> dict[str, float]:
    """Microseconds the request-latency middleware adds to a request, measured in isolation:
    the same request through a trivial view with it and without it (bench/api.py's p95 on a
    busy machine cannot resolve a difference this small)."""
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.urls import resolve

    from console.metrics_view import RequestTimingMiddleware

    request = RequestFactory().get("/api/v1/jobs/")
    request.resolver_match = resolve("/api/v1/jobs/")
    response = HttpResponse()

    def view(_: object) -> HttpResponse:
        return response

    timed = RequestTimingMiddleware(view)
    figures = {}
    for name, handler in (("with", timed), ("without", view)):
        began = time.process_time()
        for _ in range(requests):
            handler(request)
        figures[name] = (time.process_time() - began) / requests * 1e6
    return {"us_per_request": round(figures["with"] - figures["without"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--quotas", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tidepool-bench-metrics-") as scratch:
        setup(str(Path(scratch) / "bench.sqlite3"))
        began = time.perf_counter()
        seeded = seed(args.quotas, args.jobs)
        seed_seconds = round(time.perf_counter() - began, 1)
        gauges = scrape(args.scrapes)
        accumulate(args.quotas)
        worst = scrape(args.scrapes)
        middleware = middleware_cost()
    print(
        json.dumps(
            {
                "database": "SQLite (scratch)",
                **seeded,
                "seed_seconds": seed_seconds,
                "scrapes": args.scrapes,
                "gauges_only": gauges,
                "worst_case": worst,
                "http_latency_middleware": middleware,
                "goal": {"p95_ms": 200, "series": 20_000},
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
