"""A full paginated re-list of the owned pods, and API calls in steady state; prints JSON.

    .venv/bin/python bench/k8s_relist.py [--nodes 4000] [--pods 100000] [--runs 3]
                                         [--steady-seconds 120] [--watch-seconds 60]

Against the stand-in API server (tests/jobs/k8s_fake.py) on loopback, with the real client:
- relist: the watch cache's full list (pages of 500 with `continue`), median seconds over
  `--runs`, and the memory the cache keeps for the pods (tracemalloc, in a separate run, as
  tracing slows the list) against the size of the pods' JSON;
- steady: requests the cache's watch thread sends per minute while it holds its watch open
  and pods change (one status change a second), over `--steady-seconds`.

Measured once (2 shared, busy cores; the stand-in serves in the same process, so its JSON
encoding counts in the list time): 4,000 nodes and 100,000 pods (222 MB of JSON) list in
200 pages in 54 s at 5 QPS (46 s unpaced); the cache keeps 83 MB (867 bytes a pod, peak
92 MB traced); in steady state the watch thread sends 1.5 requests a minute (a 60 s watch).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.test")

import django  # noqa: E402

django.setup()

from kubernetes import client  # noqa: E402

from jobs.backends.kubernetes.api import Api, RateLimiter  # noqa: E402
from jobs.backends.kubernetes.watch import PodCache  # noqa: E402
from tests.jobs.k8s_fake import FakeApiServer, FakeCluster, recorded  # noqa: E402

INSTANCE = "tp-bench00000"
SELECTOR = f"app.kubernetes.io/managed-by=tidepool,tidepool.io/instance={INSTANCE}"


def fill(cluster: FakeCluster, nodes: int, pods: int) -> int:
    """Nodes, and owned running pods spread over them as a real list returns them."""
    for i in range(nodes):
        cluster.add_node(f"gpu-{i:05d}", labels={"tidepool.io/node-pool": "A100-80G"})
    template = recorded("podlist_page")["items"][0]
    size = 0
    cluster.keep_history = False
    for i in range(pods):
        obj = {
            "metadata": copy.deepcopy(template["metadata"]),
            "spec": {**template["spec"], "nodeName": f"gpu-{i % nodes:05d}"},
            "status": template["status"],  # shared: the stand-in serves it as JSON anyway
        }
        meta = obj["metadata"]
        meta["name"] = f"tp-{i // 8}-{i % 8}-0"
        meta["labels"].update(
            {
                "tidepool.io/instance": INSTANCE,
                "tidepool.io/workload-id": str(i // 8),
                "tidepool.io/replica": str(i % 8),
                "tidepool.io/pod-id": str(i),
            }
        )
        cluster.put_pod(obj)
        if i < 100:
            size += len(json.dumps(obj))
    cluster.keep_history = True
    return size * pods // min(pods, 100)


def cache_for(cluster: FakeCluster, watch_seconds: int, qps: float = 5) -> PodCache:
    """A watch cache with the backend's defaults (500 a page, client-go's 5 QPS / 10 burst)."""
    configuration = client.Configuration()
    configuration.host = cluster.url
    core = client.CoreV1Api(client.ApiClient(configuration))
    api = Api(core, RateLimiter(qps, 10), request_seconds=120)
    return PodCache(api, SELECTOR, watch_seconds=watch_seconds, page_size=500)


def relist(cluster: FakeCluster, runs: int) -> dict[str, object]:
    """Median time of a full list (paced at 5 QPS, and unpaced), and the memory it keeps."""
    times: dict[float, list[float]] = {5: [], 1e6: []}
    for qps, samples in times.items():
        for _ in range(runs):
            cache = cache_for(cluster, 60, qps)
            started = time.perf_counter()
            cache._list()
            samples.append(time.perf_counter() - started)
    pages = sum(1 for r in cluster.requests if r.path == "/api/v1/pods") // (2 * runs)
    cache = cache_for(cluster, 60)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    cache._list()
    after = tracemalloc.take_snapshot()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    kept = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return {
        "pods": len(cache.pods),
        "pages": pages,
        "relist_median_s_at_5_qps": round(statistics.median(times[5]), 2),
        "relist_median_s_unpaced": round(statistics.median(times[1e6]), 2),
        "relist_runs_s": {str(q): [round(t, 2) for t in ts] for q, ts in times.items()},
        "cache_kept_mb": round(kept / 2**20, 1),
        "cache_bytes_per_pod": round(kept / max(len(cache.pods), 1)),
        "list_peak_traced_mb": round(peak / 2**20, 1),
    }


def steady(cluster: FakeCluster, seconds: float, watch_seconds: int) -> dict[str, object]:
    """Requests per minute of the watch thread while pods change once a second."""
    cache = cache_for(cluster, watch_seconds)
    cache.start()
    cache.listed.wait(600)
    before = len(cluster.requests)
    names = list(cluster.pods)[:1000]
    started = time.monotonic()
    i = 0
    while time.monotonic() - started < seconds:
        namespace, name = names[i % len(names)]
        cluster.set_status(namespace, name, phase="Running", message=str(i))
        i += 1
        time.sleep(1)
    elapsed = time.monotonic() - started
    calls = len(cluster.requests) - before
    applied = int(cache.version or 0)
    cache.stop()
    return {
        "seconds": round(elapsed),
        "changes": i,
        "requests": calls,
        "requests_per_minute": round(calls * 60 / elapsed, 2),
        "client_calls_counted": cache.api.calls,
        "caught_up": applied >= cluster.latest(SELECTOR),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=4000)
    parser.add_argument("--pods", type=int, default=100000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steady-seconds", type=float, default=120)
    parser.add_argument("--watch-seconds", type=int, default=60)
    args = parser.parse_args()
    with FakeApiServer(FakeCluster()) as cluster:
        json_bytes = fill(cluster, args.nodes, args.pods)
        out: dict[str, object] = {"nodes": args.nodes, "pods_json_mb": round(json_bytes / 2**20, 1)}
        out["relist"] = relist(cluster, args.runs)
        out["steady"] = steady(cluster, args.steady_seconds, args.watch_seconds)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
