"""Reports from running jobs under load, beside the API list bench; prints one JSON object.

    .venv/bin/python bench/reports.py [--replicas 2000] [--every 2] [--seconds 60]

Seeds a scratch SQLite database (the API bench's ended jobs, plus running training jobs of
8 replicas each, ``--replicas`` in all), starts a real server (``manage.py serve
--no-traffic``: uvicorn, the in-process control loop, the simulated cluster at real speed),
then runs the API list bench (bench/api.py's GET of a page of 50, ``--list-clients`` threads)
twice: alone, then while every replica reports every ``--every`` seconds for ``--seconds``
(2,000 every 2 s: 1,000 reports/s). The reports come from a separate process: asyncio on raw
HTTP/1.1 keep-alive connections (``--connections``), each replica at its own phase.

Prints the reports' latency (p50, p95, from sending a request to its answer) and the rate
reached, the database writes the server's flushes made (statements and rows per second, from
its /metrics), its CPU per report, and the list's p95 without and with reports.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
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
from bench.api import WORKSPACES, _free_port, _percentiles, cpu_seconds, seed  # noqa: E402

REPLICAS_PER_JOB = 8
COUNTER = re.compile(r'^tidepool_report_write_(statements|rows)_total\{table="(\w+)"\} (\S+)$')
FLUSHES = re.compile(r"^tidepool_report_flush_duration_seconds_(count|sum) (\S+)$")


def seed_running(replicas: int) -> list[str]:
    """Running training jobs of REPLICAS_PER_JOB replicas (no GPUs, endless work); tokens."""
    from django.contrib.auth import get_user_model

    from cluster.models import Node
    from jobs.choices import Kind, PodStatus, Status
    from jobs.models import Pod, Workload
    from jobs.reports.tokens import report_token
    from quotas.models import Quota
    from workspaces.models import Workspace

    alice = get_user_model().objects.get(username="alice")
    workspace = Workspace.objects.get(name="workspace_a")
    quota = Quota.objects.get(name="Quota 1")
    nodes = list(Node.objects.order_by("name"))
    now = datetime.now(UTC) - timedelta(minutes=5)
    jobs = Workload.objects.bulk_create(
        Workload(
            workspace=workspace,
            quota=quota,
            owner=alice,
            name=f"report-{i:04d}",
            kind=Kind.TRAINING,
            status=Status.RUNNING,
            in_quota=True,
            replicas=REPLICAS_PER_JOB,
            total_work=1e12,
            submitted_at=now,
            started_at=now,
        )
        for i in range((replicas + REPLICAS_PER_JOB - 1) // REPLICAS_PER_JOB)
    )
    through = Workload.node_pools.through
    pool = nodes[0].node_pool_id
    through.objects.bulk_create([through(workload_id=j.pk, nodepool_id=pool) for j in jobs])
    pods = Pod.objects.bulk_create(
        Pod(
            workload=job,
            index=index,
            node=nodes[(j * REPLICAS_PER_JOB + index) % len(nodes)],
            status=PodStatus.RUNNING,
            created_at=now,
            started_at=now,
        )
        for j, job in enumerate(jobs)
        for index in range(REPLICAS_PER_JOB)
    )
    return [report_token(pod) for pod in pods[:replicas]]


async def _replica_reports(
    port: int, tokens: list[str], every: float, seconds: float, connections: int
) -> dict[str, Any]:
    """Every replica reports every `every` seconds for `seconds`; latencies and statuses."""
    queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
    latencies: list[float] = []
    lags: list[float] = []
    statuses: dict[int, int] = {}
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.5

    def request(token: str, n: int, i: int) -> bytes:
        body: dict[str, Any] = {"progress": min(n / 1000, 1.0), "heartbeat": True}
        if (n + i) % 30 == 0:
            body["checkpoint"] = f"step-{n}"
        raw = json.dumps(body).encode()
        head = (
            f"POST /api/v1/report/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(raw)}\r\n\r\n"
        )
        return head.encode() + raw

    async def schedule() -> None:
        """Put each report on the queue at its time (replica i at phase i/len × every)."""
        due = sorted(
            (start + (i / len(tokens)) * every + n * every, i, n)
            for n in range(int(seconds / every))
            for i in range(len(tokens))
        )
        for at, i, n in due:
            delay = at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            queue.put_nowait((at, request(tokens[i], n, i)))
        for _ in range(connections):
            queue.put_nowait(None)

    async def connection() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while (item := await queue.get()) is not None:
            due, raw = item
            sent = loop.time()
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            await reader.readexactly(length)
            done = loop.time()
            latencies.append(done - sent)
            lags.append(sent - due)
            statuses[status] = statuses.get(status, 0) + 1
        writer.close()

    began = time.perf_counter()
    await asyncio.gather(schedule(), *(connection() for _ in range(connections)))
    elapsed = time.perf_counter() - began - 0.5
    return {
        "sent": len(latencies),
        "rate_per_s": round(len(latencies) / elapsed, 1),
        "latency": _percentiles(latencies),
        "queue_wait_p95_ms": round(p95(lags) * 1000, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }


def generate(argv: list[str]) -> None:
    """The load generator's process: `generate PORT TOKENS_FILE EVERY SECONDS CONNECTIONS`."""
    port, tokens_file, every, seconds, connections = argv
    tokens = json.loads(Path(tokens_file).read_text())
    result = asyncio.run(
        _replica_reports(int(port), tokens, float(every), float(seconds), int(connections))
    )
    print(json.dumps(result))


def _metrics(port: int) -> dict[str, float]:
    """The server's report write counters: statements and rows by table."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    found = {}
    for line in text.splitlines():
        if match := COUNTER.match(line):
            found[f"{match[1]}_{match[2]}"] = float(match[3])
        elif match := FLUSHES.match(line):
            found[f"flush_{match[1]}"] = float(match[2])
    return found


def _lists(
    port: int, token: str, clients: int, pages: int, stop: threading.Event
) -> dict[str, Any]:
    """The API list bench: `clients` threads GET pages of 50 back to back until `stop`."""
    samples: list[float] = []
    errors = 0
    lock = threading.Lock()
    auth = {"Authorization": f"Token {token}"}

    def worker(k: int) -> None:
        nonlocal errors
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        i = k
        while not stop.is_set():
            ws, page = WORKSPACES[i % 3], 1 + (i // 3) % pages
            began = time.perf_counter()
            conn.request("GET", f"/api/v1/jobs/?workspace={ws}&page={page}", headers=auth)
            response = conn.getresponse()
            response.read()
            with lock:
                samples.append(time.perf_counter() - began)
                errors += response.status != 200
            i += clients

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {**_percentiles(samples), "errors": errors}


def _timed_lists(port: int, token: str, args: Any, seconds: float) -> dict[str, Any]:
    """The list bench for `seconds`, over the first 20 pages of each workspace (or fewer)."""
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()
    pages = max(1, min(20, args.jobs // len(WORKSPACES) // 50))
    return _lists(port, token, args.list_clients, pages, stop)


def main() -> None:
    if sys.argv[1:2] == ["generate"]:
        generate(sys.argv[2:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, default=2000)
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=10_000, help="ended jobs the lists page")
    parser.add_argument("--list-clients", type=int, default=2)
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="tidepool-bench-reports-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings.local",
        "SQLITE_PATH": str(scratch / "bench.sqlite3"),
        "TIDEPOOL_METRICS_OPEN": "localhost",
        "TIDEPOOL_FAST_PATHS": os.environ.get("TIDEPOOL_FAST_PATHS", "1"),
    }
    env.pop("DATABASE_URL", None)
    os.environ.update(env)
    api_tokens = seed(args.jobs)
    tokens = seed_running(args.replicas)
    from django.db import connection

    connection.close()
    tokens_file = scratch / "tokens.json"
    tokens_file.write_text(json.dumps(tokens))

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-traffic", "--speed", "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(scratch / "server.log", "w"),  # noqa: SIM115
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _metrics(port)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("server did not start") from None
                time.sleep(0.2)
        token = api_tokens["admin"]
        _timed_lists(port, token, args, 3)  # warm up
        cpu_idle = cpu_seconds(server.pid)
        time.sleep(5)  # the control loop alone
        cpu_alone, alone_began = cpu_seconds(server.pid), time.perf_counter()
        idle_per_s = (cpu_alone - cpu_idle) / 5
        alone = _timed_lists(port, token, args, min(args.seconds, 30))
        alone_per_s = (cpu_seconds(server.pid) - cpu_alone) / (time.perf_counter() - alone_began)

        before, cpu_before = _metrics(port), cpu_seconds(server.pid)
        began = time.perf_counter()
        generator = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "generate",
                str(port),
                str(tokens_file),
                str(args.every),
                str(args.seconds),
                str(args.connections),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
        )
        time.sleep(2)  # the generator's start-up and its first round
        beside = _timed_lists(port, token, args, min(args.seconds - 4, 30))
        out, _ = generator.communicate(timeout=args.seconds + 120)
        time.sleep(2.5)  # the last flush
        elapsed = time.perf_counter() - began
        after, cpu_after = _metrics(port), cpu_seconds(server.pid)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()

    reports = json.loads(out)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    flushes = delta.pop("flush_count", 0)
    flush_seconds = delta.pop("flush_sum", 0)
    writes = {k: round(v / elapsed, 2) for k, v in delta.items()}
    print(
        json.dumps(
            {
                "mode": "embedded: SQLite, uvicorn (manage.py serve), in-process runner",
                "replicas": args.replicas,
                "report_every_s": args.every,
                "target_rate_per_s": round(args.replicas / args.every, 1),
                "seconds": args.seconds,
                "connections": args.connections,
                "reports": reports,
                "server_cpu_ms_per_report": round(
                    1000 * (cpu_after - cpu_before) / max(reports["sent"], 1), 3
                ),
                # Cores the server used: its control loop alone, with the lists, with both.
                "server_cpu_per_s": {
                    "idle": round(idle_per_s, 3),
                    "lists": round(alone_per_s, 3),
                    "lists_and_reports": round((cpu_after - cpu_before) / elapsed, 3),
                },
                "db_writes_per_s": writes,
                "flushes": {
                    "n": int(flushes),
                    "every_s": round(elapsed / max(flushes, 1), 2),
                    "mean_ms": round(1000 * flush_seconds / max(flushes, 1), 1),
                },
                "list_jobs_page_of_50": {
                    "clients": args.list_clients,
                    "without_reports": alone,
                    "with_reports": beside,
                    "p95_ratio": round(beside["p95_ms"] / max(alone["p95_ms"], 1e-9), 2),
                },
                "goals": {"reports_p95_ms": 50, "list_p95_ratio": 1.2},
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
