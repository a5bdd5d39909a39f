"""Page latency at 20 concurrent clients over 10,000 jobs, as `make demo` serves it; prints JSON.

    .venv/bin/python bench/pages.py [--jobs 10000] [--clients 20] [--requests 200]
                                    [--against REF]

Seeds a scratch SQLite database (the demo, then `--jobs` training jobs in workspace_b with pods
for the running ones), starts a real server (`manage.py serve --no-traffic`: uvicorn plus the
in-process control loop, in real time: SIM_SPEED 1, so a cycle and a sync every 5 s as on a real
cluster, not the demo's 144x) and fetches each page over `--clients` threads, each signed in as the
persona a user of that page would be: the quota tree, the All jobs page and a quota's overview
as the platform admin, the jobs list and the member's quota overview as bob (a developer of
workspace_b). A page the checkout does not have (404) is reported as missing.

--against REF also runs the same pages on a checkout of git REF (a scratch worktree, seeded by
its own code) in the same run, and prints both and the ratio REF/this. The goal is a p95 under
150 ms for each page.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# The checkout whose code seeds and serves; a --against run points this at the other worktree.
ROOT = Path(os.environ.get("TIDEPOOL_BENCH_ROOT", Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(ROOT))
BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(BENCH))

# page name → (persona, path); {quota} is the id of Quota 1.1 in the seeded database.
PAGES: dict[str, tuple[str, str]] = {
    "quota_tree": ("admin", "/quotas/"),
    "jobs_list": ("bob", "/workspaces/workspace_b/jobs/"),
    "all_jobs": ("admin", "/jobs/"),
    "quota_overview": ("admin", "/quotas/{quota}/"),
    "member_quota_overview": ("bob", "/workspaces/workspace_b/quotas/{quota}/"),
}
GOAL_P95_MS = 150


def seed(count: int) -> dict[str, Any]:
    """Migrate, seed the demo and `count` jobs; return session cookies and the quota's id."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction
    from django.test import Client

    from console.demo import seed_demo
    from jobs.choices import IdlePolicy, Kind, PodStatus, Status
    from jobs.models import Pod, Workload

    call_command("migrate", verbosity=0, interactive=False)
    demo = seed_demo()
    users = get_user_model().objects
    bob = users.get(username="bob")
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
        pods = [
            Pod(
                workload=job,
                index=r,
                node=nodes[(i + r) % len(nodes)],
                status=PodStatus.RUNNING if job.status == Status.RUNNING else PodStatus.SUCCEEDED,
                borrowed=job.status == Status.RUNNING and not job.in_quota,
                created_at=job.submitted_at,
            )
            for i, job in enumerate(jobs)
            for r in range(job.replicas)
        ]
        Pod.objects.bulk_create(pods, batch_size=2000)
    sessions = {}
    for name in ("admin", "bob"):
        client = Client()
        client.force_login(users.get(username=name))
        sessions[name] = client.cookies["sessionid"].value
    return {"sessions": sessions, "quota": quota.pk}


def serve_and_time(root: Path, args: Any, scratch: Path) -> dict[str, Any]:
    """Seed a database with `root`'s code, serve it from `root`, time every page."""
    from bench import isolated
    from bench.api import _free_port, cpu_seconds, hammer

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings.local",
        "SQLITE_PATH": str(scratch / "bench.sqlite3"),
        "TIDEPOOL_DEBUG": "0",
        "DEBUG": "0",
        "TIDEPOOL_RUNNER": "off",
        "SIM_SPEED": "1",  # a real cluster's cadence: a cycle and a sync every 5 s
        "TIDEPOOL_BENCH_ROOT": str(root),
    }
    env.pop("DATABASE_URL", None)
    began = time.perf_counter()
    seeded = subprocess.run(
        isolated(str(Path(__file__).resolve()), "--seed-only", "--jobs", str(args.jobs)),
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    seed_seconds = time.perf_counter() - began
    state = json.loads(seeded.stdout.strip().splitlines()[-1])
    env.pop("TIDEPOOL_RUNNER")
    port = _free_port()
    server = subprocess.Popen(
        isolated("manage.py", "serve", "--port", str(port), "--no-traffic"),
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(scratch / "server.log", "w"),  # noqa: SIM115
    )
    try:
        _wait_until_up(port, server, scratch / "server.log")
        pages: dict[str, Any] = {}
        for name, (persona, pattern) in PAGES.items():
            path = pattern.format(quota=state["quota"])
            headers = {"Cookie": f"sessionid={state['sessions'][persona]}"}
            if _status(port, path, headers) == 404:
                pages[name] = {"path": path, "missing": True}
                continue

            def request(i: int, path: str = path, headers: dict = headers) -> tuple:
                return "GET", path, None, headers, 200

            hammer(port, args.clients, args.clients * 2, request)  # warm up
            cpu_before = cpu_seconds(server.pid)
            figures, errors = hammer(port, args.clients, args.requests, request)
            figures["server_cpu_ms"] = round(
                1000 * (cpu_seconds(server.pid) - cpu_before) / args.requests, 2
            )
            pages[name] = {"path": path, **figures, "errors": len(errors)}
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    return {"seed_seconds": round(seed_seconds, 1), "pages": pages}


def _status(port: int, path: str, headers: dict[str, str]) -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.status


def _wait_until_up(port: int, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            _status(port, "/login/", {})
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                tail = log.read_text()[-3000:]
                raise SystemExit(f"server did not start:\n{tail}") from None
            time.sleep(0.2)


def _worktree(ref: str, scratch: Path) -> Path:
    """A detached checkout of `ref` beside this one (git worktree), with the compiled core off."""
    path = scratch / "against"
    subprocess.run(
        ["git", "-C", str(BENCH), "worktree", "add", "--detach", str(path), ref],
        check=True,
        capture_output=True,
    )
    return path


def _ratios(this: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    table = {}
    for name, now in this["pages"].items():
        then = other["pages"].get(name, {})
        if now.get("missing") or then.get("missing") or not then:
            continue
        table[name] = {
            f: round(then[f] / max(now[f], 1e-9), 2)
            for f in ("median_ms", "p95_ms", "server_cpu_ms")
        }
    return table


def main() -> None:
    """Seed, serve, time, print (or only seed, when a run drives this file as its seeder)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--against", help="also time a checkout of this git ref, side by side")
    parser.add_argument("--seed-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seed_only:
        print(json.dumps(seed(args.jobs)))
        return
    os.environ["TIDEPOOL_PURE_CORE"] = "1"  # both checkouts run the same (pure) core
    with tempfile.TemporaryDirectory(prefix="tidepool-bench-pages-") as tmp:
        scratch = Path(tmp)
        (scratch / "this").mkdir()
        result: dict[str, Any] = {
            "bench": "pages",
            "mode": "embedded: SQLite, uvicorn (manage.py serve), in-process runner",
            "jobs": args.jobs,
            "clients": args.clients,
            "requests_per_page": args.requests,
            "goal_p95_ms": GOAL_P95_MS,
            "this": serve_and_time(BENCH, args, scratch / "this"),
        }
        if args.against:
            other = _worktree(args.against, scratch)
            (scratch / "other").mkdir()
            try:
                result[args.against] = serve_and_time(other, args, scratch / "other")
            finally:
                subprocess.run(
                    ["git", "-C", str(BENCH), "worktree", "remove", "--force", str(other)],
                    check=False,
                )
            result[f"{args.against}/this"] = _ratios(result["this"], result[args.against])
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
