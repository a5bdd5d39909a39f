"""API latency in the embedded mode: 10,000 jobs, 20 concurrent clients; prints one JSON object.

    .venv/bin/python bench/api.py [--requests 400] [--submits 200] [--clients 20] [--compare]

--compare runs the same requests with TIDEPOOL_FAST_PATHS on and off (console.fast), each on
a copy of the one seeded database, and prints median, p95 and server CPU per request side by
side with their ratios. `--switch TIDEPOOL_METRICS_HTTP` compares that setting instead (the
request-latency middleware of /metrics, console.metrics_view).

Seeds a scratch SQLite database (bulk_create), starts a real server process
(`manage.py serve --no-traffic`: uvicorn plus the in-process control loop on the simulated
cluster), then measures GET /api/v1/jobs/?workspace=… (a page of 50) and POST /api/v1/jobs/
with threads on http.client.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import p95  # noqa: E402

WORKSPACES = ("workspace_a", "workspace_b", "workspace_c")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed(jobs: int) -> dict[str, str]:
    """Migrate, seed the demo and `jobs` ended training jobs; return each persona's token."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from console.demo import seed_demo
    from jobs.choices import Kind, Status
    from jobs.models import Workload, WorkloadEvent

    call_command("migrate", verbosity=0)
    demo = seed_demo()
    users = {u.username: u for u in get_user_model().objects.all()}
    owners = {"workspace_a": "alice", "workspace_b": "bob", "workspace_c": "carol"}
    quotas = {"workspace_a": "Quota 1", "workspace_b": "Quota 1.1", "workspace_c": "Quota 1.2"}
    start = datetime(2026, 11, 1, tzinfo=UTC)
    statuses = (Status.SUCCEEDED, Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)
    rows = []
    for i in range(jobs):
        ws = WORKSPACES[i % 3]
        at = start + timedelta(seconds=30 * i)
        rows.append(
            Workload(
                workspace=demo.workspaces[ws],
                quota=demo.quotas[quotas[ws]],
                owner=users[owners[ws]],
                name=f"seed-{i:05d}",
                kind=Kind.TRAINING,
                status=statuses[i % len(statuses)],
                replicas=1 + i % 4,
                gpu=1000 * (1 + i % 8),
                total_work=3600,
                progress=3600,
                submitted_at=at,
                started_at=at,
                ended_at=at + timedelta(hours=1),
            )
        )
    created = Workload.objects.bulk_create(rows, batch_size=2000)
    through = Workload.node_pools.through
    through.objects.bulk_create(
        [through(workload_id=w.pk, nodepool_id=demo.node_pool.pk) for w in created],
        batch_size=2000,
    )
    WorkloadEvent.objects.bulk_create(
        [
            WorkloadEvent(workload=w, at=w.submitted_at, kind="submitted", message="seeded")
            for w in created
        ],
        batch_size=2000,
    )
    return {name: Token.objects.get_or_create(user=u)[0].key for name, u in users.items()}


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 1),
        "p95_ms": round(p95(ordered) * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid: int) -> dict[str, int]:
    """Voluntary and involuntary context switches so far, summed over the process's threads."""
    total = {"voluntary": 0, "involuntary": 0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total["voluntary"] += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                total["involuntary"] += int(line.split()[1])
    return total


def hammer(port: int, clients: int, total: int, request: Any) -> tuple[dict[str, float], list[str]]:
    """Run `total` requests over `clients` threads, each with its own connection."""
    samples: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(total))

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            began = time.perf_counter()
            method, path, body, headers, expect = request(i)
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                status, err_text = 0, repr(err)
            elapsed = time.perf_counter() - began
            with lock:
                samples.append(elapsed)
                if status != expect:
                    errors.append(f"{method} {path}: {status}" if status else err_text)
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return _percentiles(samples), errors


def measure(env: dict[str, str], tokens: dict[str, str], args: Any) -> dict[str, Any]:
    """Start a server on `env`'s database, warm it up, then time the lists and the submits."""
    port = _free_port()
    log = Path(env["SQLITE_PATH"]).with_suffix(".log")
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-traffic"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),  # noqa: SIM115
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/api/v1/schema/")
                conn.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("server did not start") from None
                time.sleep(0.2)

        auth = {"Authorization": f"Token {tokens['admin']}"}

        def list_request(i: int) -> tuple[str, str, None, dict[str, str], int]:
            ws = WORKSPACES[i % 3]
            page = 1 + (i // 3) % 20
            return "GET", f"/api/v1/jobs/?workspace={ws}&page={page}", None, auth, 200

        bob = {"Authorization": f"Token {tokens['bob']}", "Content-Type": "application/json"}

        def submit_request(i: int) -> tuple[str, str, bytes, dict[str, str], int]:
            body = {"workspace": "workspace_b", "name": f"bench-{i}", "gpu": 1, "replicas": 1}
            return "POST", "/api/v1/jobs/", json.dumps(body).encode(), bob, 201

        hammer(port, args.clients, 40, list_request)  # warm up
        # The server's CPU per request (its control loop included) is steadier than latency
        # on a shared machine: with one process and the GIL, latency ~ clients x this.
        before, switches_before = cpu_seconds(server.pid), context_switches(server.pid)
        listed, list_errors = hammer(port, args.clients, args.requests, list_request)
        middle, switches_middle = cpu_seconds(server.pid), context_switches(server.pid)
        submitted, submit_errors = hammer(port, args.clients, args.submits, submit_request)
        after, switches_after = cpu_seconds(server.pid), context_switches(server.pid)
        listed["server_cpu_ms"] = round(1000 * (middle - before) / args.requests, 2)
        submitted["server_cpu_ms"] = round(1000 * (after - middle) / args.submits, 2)
        # Thread hand-overs in the server (GIL, locks, I/O waits) per request.
        for figures, start, end, n in (
            (listed, switches_before, switches_middle, args.requests),
            (submitted, switches_middle, switches_after, args.submits),
        ):
            for kind in ("voluntary", "involuntary"):
                figures[f"server_{kind}_switches"] = round((end[kind] - start[kind]) / n, 1)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    return {
        "list_jobs_page_of_50": {**listed, "errors": len(list_errors)},
        "submit_job": {**submitted, "errors": len(submit_errors)},
        "error_samples": (list_errors + submit_errors)[:5],
    }


# The figures --compare sets side by side.
COMPARED = ("median_ms", "p95_ms", "server_cpu_ms")


def side_by_side(on: dict[str, Any], off: dict[str, Any]) -> dict[str, Any]:
    """Each compared figure with the switch on and off, and how many times off is on's."""
    table: dict[str, Any] = {}
    for request in ("list_jobs_page_of_50", "submit_job"):
        table[request] = {
            figure: {
                "on": on[request][figure],
                "off": off[request][figure],
                "off/on": round(off[request][figure] / max(on[request][figure], 1e-9), 2),
            }
            for figure in COMPARED
        }
        table[request]["errors"] = {"on": on[request]["errors"], "off": off[request]["errors"]}
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--submits", type=int, default=200)
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run with the switch on, then off, each on a copy of one seeded database",
    )
    parser.add_argument(
        "--switch", default="TIDEPOOL_FAST_PATHS", help="the setting --compare flips"
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="tidepool-bench-api-"))
    settings_module = "console.settings.local"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(scratch), os.environ.get("PYTHONPATH", "")]),
        "DJANGO_SETTINGS_MODULE": settings_module,
        "SQLITE_PATH": str(scratch / "bench.sqlite3"),
        "DEBUG": os.environ.get("BENCH_DEBUG", "0"),
    }
    env.pop("DATABASE_URL", None)
    os.environ.update(env)
    began = time.perf_counter()
    tokens = seed(args.jobs)
    seed_seconds = time.perf_counter() - began
    from django.db import connection

    with connection.cursor() as cursor:  # the seed's WAL into the file copied below
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()

    switch = os.environ.get(args.switch, "1")
    runs = ("1", "0") if args.compare else (switch,)
    figures = {}
    for value in runs:
        database = scratch / f"bench-{value}.sqlite3"
        shutil.copyfile(scratch / "bench.sqlite3", database)
        run_env = {**env, "SQLITE_PATH": str(database), args.switch: value}
        figures[value] = measure(run_env, tokens, args)

    head = {
        "mode": "embedded: SQLite, uvicorn (manage.py serve), in-process runner",
        "jobs": args.jobs,
        "workspaces": len(WORKSPACES),
        "clients": args.clients,
        "seed_seconds": round(seed_seconds, 1),
    }
    if args.compare:
        body = {
            "compare": "TIDEPOOL_FAST_PATHS on (speed layer) vs off (stock ORM, serializers, "
            "SQLite backend, ASGI handler)"
            if args.switch == "TIDEPOOL_FAST_PATHS"
            else f"{args.switch} on vs off",
            **side_by_side(figures["1"], figures["0"]),
            "error_samples": figures["1"]["error_samples"] + figures["0"]["error_samples"],
        }
    else:
        body = {
            "fast_paths": switch,
            "sqlite": "WAL, IMMEDIATE, writers queued in the process (console.fast.sqlite)"
            if switch != "0"
            else "WAL, IMMEDIATE, Django's backend",
            **figures[switch],
        }
    print(
        json.dumps(
            {
                **head,
                **body,
                "goal_p95_ms": 150,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
