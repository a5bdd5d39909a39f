"""The distributed stack under load: submits through the API, live events on websockets; JSON.

    .venv/bin/python bench/distributed.py [--jobs 5000] [--clients 20] [--sockets 300]
                                          [--web 1,2] [--workers 2] [--start-delay 5]

For each number of web processes (`--web`, 1 then 2 by default) it brings up a stack of its
own with tools/stack.py, in a scratch folder on free ports: PostgreSQL, Redis, the web
processes (uvicorn), Celery workers and one beat, the production settings and the simulated
cluster whose pods start `--start-delay` seconds after they are placed. It then:

- adds nodes to the demo's node pool until every job fits (`--nodes` overrides), and grows
  the quotas with it, so the time to Running measures the control loop, not a queue; each
  job (2 replicas of 1 GPU by default) runs for an hour, longer than the run;
- logs alice, bob and carol in (/login/) and opens `--sockets` websockets on their
  workspaces' live events, spread over the web processes, from a process of its own that
  reconnects a closed socket as the page does (static/js/live.js);
- submits `--jobs` training jobs (POST /api/v1/jobs/, token auth) from `--clients` threads,
  each a persona on its own workspace and web process, and times each answer;
- waits until every job has all its replicas Running, then reads the database: submit to
  Running (the last replica's started_at minus the job's submitted_at), submit to admitted,
  the events each socket should have had (those of its workspace) against
  those it got, and the invariants (no node or GPU over capacity, no live pod of an ended
  workload);
- reads the scheduling cycle's and backend sync's durations from the workers' task lines
  ("Task jobs.tasks.scheduling_cycle[…] succeeded in Xs: admitted"), the tracebacks in the
  web and worker logs, and the CPU each process group used while the submits ran.

`--jobs 300 --sockets 30` is a smoke run; `--keep` keeps each stack's folder and logs.

Submit to Running adds up three parts: submit to admitted, then the start delay, then
"pod due to Running". Submit to admitted can be slightly negative, because a cycle stamps its
admissions with the time it began, and a job may commit while the cycle plans. "Pod due to
Running" is how long after its start time the backend sync (every 5 s) saw the pod run.

Event latency is the time the socket received an event minus the event's `at` as stored:
a submit's "submitted" entry is stamped in the request, just before its commit, so its
latency is the push's; a cycle's entries are stamped when the cycle starts, so theirs
include the cycle's own time.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import itertools
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from array import array
from collections import Counter, defaultdict
from contextlib import redirect_stdout
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import p95  # noqa: E402
from bench.api import cpu_seconds  # noqa: E402

# Each persona submits to, and watches, its own workspace.
PERSONAS = {"alice": "workspace_a", "bob": "workspace_b", "carol": "workspace_c"}
TODAY = {
    "submits_per_s": 34,
    "submit_p95_ms": 780,
    "submit_to_running_p95_s": 2.2,
    "event_p95_ms": 254,
    "sockets": 306,
}
# The last line of a traceback: the exception's class (dotted), then its message.
EXCEPTION_LINE = re.compile(r"^((?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Timeout))(?::|$)")
CYCLE_LINE = re.compile(
    r"^\[(?P<at>[\d-]+ [\d:]+),(?P<ms>\d+): [^\]]*\] Task jobs\.tasks\.(?P<task>\w+)\[[^\]]*\] "
    r"succeeded in (?P<seconds>[\d.e-]+)s: (?P<result>.*)$"
)


# Figures


def _spread(samples: list[float], unit: str = "ms") -> dict[str, float | int]:
    """n, median, p95 and max of samples in seconds, shown in ms or s."""
    if not samples:
        return {"n": 0}
    scale, digits = (1000.0, 1) if unit == "ms" else (1.0, 3)
    return {
        "n": len(samples),
        f"median_{unit}": round(statistics.median(samples) * scale, digits),
        f"p95_{unit}": round(p95(samples) * scale, digits),
        f"max_{unit}": round(max(samples) * scale, digits),
    }


def _tree_cpu(root: int) -> float:
    """CPU seconds of a process, its live descendants and the children they reaped (/proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, parent in parents.items() if parent == pid and p not in tree]
        tree.update(children)
        frontier += children
    total = 0.0
    for pid in tree:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, and of reaped children
        total += ticks / os.sysconf("SC_CLK_TCK")
    return total


# HTTP


def _request(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, list[str]], bytes]:
    """One request on a fresh connection: status, headers (lower-case names), body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        seen: dict[str, list[str]] = defaultdict(list)
        for name, value in response.getheaders():
            seen[name.lower()].append(value)
        return response.status, seen, response.read()
    finally:
        conn.close()


def _cookies(headers: dict[str, list[str]]) -> dict[str, str]:
    """The cookies a response sets, by name."""
    jar = {}
    for line in headers.get("set-cookie", []):
        name, _, rest = line.partition("=")
        jar[name.strip()] = rest.split(";", 1)[0]
    return jar


def token(port: int, username: str, password: str) -> str:
    """POST /api/v1/auth/token/."""
    body = json.dumps({"username": username, "password": password}).encode()
    status, _, answer = _request(
        port, "POST", "/api/v1/auth/token/", body, {"Content-Type": "application/json"}
    )
    if status != 200:
        raise SystemExit(f"token for {username}: {status} {answer[:200]!r}")
    return str(json.loads(answer)["token"])


def session(port: int, username: str, password: str) -> str:
    """Log in through /login/ as a browser would; the session cookie's value."""
    status, headers, page = _request(port, "GET", "/login/")
    csrf = _cookies(headers)["csrftoken"]
    match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if status != 200 or match is None:
        raise SystemExit(f"/login/ answered {status} without a CSRF token")
    form = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": match[1].decode()}
    ).encode()
    status, headers, _ = _request(
        port,
        "POST",
        "/login/",
        form,
        {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={csrf}"},
    )
    jar = _cookies(headers)
    if status != 302 or "sessionid" not in jar:
        raise SystemExit(f"login as {username}: {status}, no session")
    return jar["sessionid"]


def submit_all(
    ports: list[int], tokens: dict[str, str], args: argparse.Namespace
) -> list[tuple[float, float, int, str]]:
    """POST every job from `args.clients` threads; per job: start time, seconds, status, error.

    Client c is persona c % 3 on web port c % len(ports), with one kept-alive connection.
    """
    results: list[tuple[float, float, int, str]] = []
    lock = threading.Lock()
    counter = itertools.count()
    users = list(PERSONAS)

    def client(c: int) -> None:
        user, port = users[c % len(users)], ports[c % len(ports)]
        headers = {"Authorization": f"Token {tokens[user]}", "Content-Type": "application/json"}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        mine = []
        while (i := next(counter)) < args.jobs:  # itertools.count is atomic under the GIL
            body = {
                "workspace": PERSONAS[user],
                "name": f"bench-{i:05d}",
                "gpu": args.gpu,
                "replicas": args.replicas,
            }
            began, tick = time.time(), time.perf_counter()
            try:
                conn.request("POST", "/api/v1/jobs/", json.dumps(body).encode(), headers)
                response = conn.getresponse()
                answer = response.read()
                status, error = response.status, "" if response.status == 201 else answer[:200]
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                status, error = 0, repr(err)
            mine.append((began, time.perf_counter() - tick, status, str(error)))
        conn.close()
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# The websocket listener: a process of its own, so its work does not share the GIL with the
# submitting threads.


def listen(spec_file: str, out_file: str) -> None:
    """Open every socket of the spec, print "ready", record frames until "stop" on stdin."""
    asyncio.run(_listen(json.loads(Path(spec_file).read_text()), Path(out_file)))


async def _listen(spec: list[dict[str, str]], out: Path) -> None:
    """Keep each socket open as static/js/live.js does: after a close, reconnect in 1 s,
    doubling to 30 s (reset once open). What is pushed while a socket is away is missed."""
    from websockets.asyncio.client import ClientConnection, connect

    # Compact: 300 sockets at 5,000 jobs receive ~2 million frames; each frame is kept as its
    # time, its socket and the index of its (workload, kind, message, name) in `keys`.
    keys: dict[tuple[Any, ...], int] = {}
    times, owners, which = array("d"), array("i"), array("i")
    failures: list[str] = []
    disconnects: list[tuple[float, int, str]] = []
    sockets: dict[int, ClientConnection] = {}

    async def one(index: int, socket_spec: dict[str, str], opened: asyncio.Future[None]) -> None:
        delay = 1.0
        while True:
            try:
                ws = await connect(
                    socket_spec["url"],
                    additional_headers={
                        "Cookie": socket_spec["cookie"],
                        "Origin": socket_spec["origin"],
                    },
                    open_timeout=120,
                    max_size=None,
                )
            except Exception as error:  # noqa: BLE001 - reported, not raised
                if not opened.done():
                    failures.append(f"{socket_spec['url']}: {error!r}")
                    opened.set_result(None)
                    return
                disconnects.append((time.time(), index, f"reconnect failed: {error!r}"))
            else:
                sockets[index] = ws
                delay = 1.0
                if not opened.done():
                    opened.set_result(None)
                try:
                    async for frame in ws:
                        received = time.time()
                        data = json.loads(frame)
                        # a push of several events is one frame (jobs/consumers.py `frame`)
                        for event in data["events"] if data.get("kind") == "batch" else [data]:
                            fields = ("workload", "kind", "message", "name")
                            key = tuple(event.get(f) for f in fields)
                            times.append(received)
                            owners.append(index)
                            which.append(keys.setdefault(key, len(keys)))
                    why = f"closed {ws.close_code} {ws.close_reason}"
                except Exception as error:  # noqa: BLE001
                    why = repr(error)
                disconnects.append((time.time(), index, why))
                if ws.close_code == 4403:  # refused: the page gives up too
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)

    loop = asyncio.get_running_loop()
    opened = [loop.create_future() for _ in spec]
    tasks = [
        asyncio.create_task(one(i, s, f)) for i, (s, f) in enumerate(zip(spec, opened, strict=True))
    ]
    await asyncio.gather(*opened)
    print(json.dumps({"ready": len(sockets), "failed": failures[:5], "failures": len(failures)}))
    sys.stdout.flush()
    await asyncio.to_thread(sys.stdin.readline)
    frames = {"times": times.tolist(), "sockets": owners.tolist(), "which": which.tolist()}
    kept = {"keys": list(keys), **frames, "disconnects": list(disconnects)}
    out.write_text(json.dumps(kept))
    for task in tasks:
        task.cancel()
    for ws in sockets.values():
        ws.transport.abort()  # no closing handshakes with hundreds of sockets: the run is over
    await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps({"done": len(times)}))


# One run: a stack with `web` web processes


def _ports(web: int) -> tuple[int, int, int]:
    """Free ports: the first of `web` in a row for the web processes, PostgreSQL's, Redis's.

    Nothing listens on them yet, so each is checked against those already chosen too.
    """
    from tools.servers import free_port, listening

    while True:
        first = free_port()
        if first + web < 65536 and not any(listening(first + i) for i in range(1, web)):
            break
    chosen = set(range(first, first + web))
    servers = []
    while len(servers) < 2:
        port = free_port()
        if port not in chosen:
            chosen.add(port)
            servers.append(port)
    return first, servers[0], servers[1]


def _django(env: dict[str, str]) -> None:
    """Point this process's Django at the stack's database."""
    os.environ.update(env)
    import django

    django.setup()


def _grow_cluster(args: argparse.Namespace) -> dict[str, Any]:
    """Add 8-GPU nodes until every job fits In Quota (or `--nodes` of them); the cluster.

    Quota 1 grows to the whole pool and its children 1.1 and 1.2 to 40% of it each, so each
    persona's jobs (about a third of them) fit their quota: beyond the guarantees nothing is
    idle to borrow (the pool's idle scope is the quota tree).
    """
    from django.contrib.auth import get_user_model

    from cluster.models import Node, NodePool
    from cluster.services import node_create
    from console.demo import NODE_CPU, NODE_MEMORY
    from quotas.amounts import Amounts
    from quotas.models import Quota
    from quotas.services.quotas import quota_scale

    pool = NodePool.objects.get(name="A100-80G")
    have = sum(Node.objects.filter(node_pool=pool).values_list("gpus", flat=True))
    needed = math.ceil(args.jobs * args.replicas * args.gpu)
    extra = args.nodes if args.nodes is not None else max(0, math.ceil((needed - have) / 8))
    for i in range(extra):
        node_create(node_pool=pool, name=f"bench-{i:05d}", gpus=8, cpu=NODE_CPU, memory=NODE_MEMORY)
    total = have + 8 * extra
    admin = get_user_model().objects.get(username="admin")
    if extra:  # the parent first: children may not add up to more than it
        for name, gpus in (
            ("Quota 1", total),
            ("Quota 1.1", total * 2 // 5),
            ("Quota 1.2", total * 2 // 5),
        ):
            quota_scale(
                actor=admin,
                quota=Quota.objects.get(name=name),
                resources={pool: Amounts(min_gpu=gpus * 1000)},
            )
    mins = {
        q.name: sum(r.min_gpu for r in q.resources.all()) // 1000
        for q in Quota.objects.prefetch_related("resources")
    }
    return {
        "nodes": Node.objects.filter(node_pool=pool).count(),
        "gpus": total,
        "quota_min_gpus": mins,
    }


def _wait_running(args: argparse.Namespace) -> tuple[float, int]:
    """Until every bench job has all replicas Running (or the timeout); when, and how many."""
    from django.db.models import Count, F, Q

    from jobs.choices import PodStatus
    from jobs.models import Workload

    deadline = time.monotonic() + args.settle_timeout
    running = 0
    while time.monotonic() < deadline:
        running = (
            Workload.objects.filter(name__startswith="bench-")
            .annotate(up=Count("pods", filter=Q(pods__status=PodStatus.RUNNING)))
            .filter(up__gte=F("replicas"))
            .count()
        )
        if running >= args.jobs:
            break
        time.sleep(0.5)
    return time.time(), running


def _to_running() -> dict[str, Any]:
    """Submit to all replicas Running and submit to placed, per bench job, from the rows."""
    from jobs.choices import PodStatus
    from jobs.models import Pod, Workload

    jobs = {
        pk: (submitted, placed, replicas)
        for pk, submitted, placed, replicas in Workload.objects.filter(
            name__startswith="bench-"
        ).values_list("pk", "submitted_at", "started_at", "replicas")
    }
    started: dict[int, list[datetime]] = defaultdict(list)
    sync_lag = []  # the backend sync's period: due to start, seen Running
    for workload, at, due in Pod.objects.filter(
        workload_id__in=jobs, status=PodStatus.RUNNING, started_at__isnull=False
    ).values_list("workload_id", "started_at", "start_after"):
        started[workload].append(at)
        if due is not None:
            sync_lag.append((at - due).total_seconds())
    to_running, to_admitted, restarted = [], [], 0
    for pk, (submitted, placed, replicas) in jobs.items():
        if placed is not None:
            to_admitted.append((placed - submitted).total_seconds())
        if len(started[pk]) >= replicas:
            to_running.append((max(started[pk]) - submitted).total_seconds())
    restarted = Pod.objects.filter(workload_id__in=jobs, attempt__gt=0).count()
    return {
        "submit_to_running_s": {
            **_spread(to_running, "s"),
            "not_running": len(jobs) - len(to_running),
        },
        "submit_to_admitted_s": _spread(to_admitted, "s"),
        "pod_due_to_running_s": _spread(sync_lag, "s"),
        "pods_of_later_attempts": restarted,
    }


def _events(
    listened: dict[str, Any], sockets: list[dict[str, str]], until: float
) -> dict[str, Any]:
    """Each socket's events against its workspace's rows up to `until`; delivery latency."""
    from jobs.models import WorkloadEvent

    expected: dict[str, Counter[tuple[int, str, str]]] = defaultdict(Counter)
    stamped: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    rows = (
        WorkloadEvent.objects.filter(workload__name__startswith="bench-")
        .order_by("at", "pk")
        .values_list("workload_id", "kind", "message", "at", "workload__workspace__name")
    )
    for workload, kind, message, at, workspace in rows:
        key = (workload, kind, message)
        stamped[key].append(at.timestamp())
        if at.timestamp() < until:
            expected[workspace][key] += 1
    got: list[Counter[tuple[int, str, str]]] = [Counter() for _ in sockets]
    latencies: dict[str, list[float]] = defaultdict(list)
    by_port: dict[str, list[float]] = defaultdict(list)
    other = 0
    keys = listened["keys"]
    for received, index, k in zip(
        listened["times"], listened["sockets"], listened["which"], strict=True
    ):
        workload, kind, message, name = keys[k]
        if workload is None or not str(name).startswith("bench-"):
            other += 1
            continue
        key = (workload, kind, message)
        seen = got[index][key]
        got[index][key] += 1
        if seen < len(stamped[key]) and stamped[key][seen] < until:
            latency = received - stamped[key][seen]
            latencies[kind].append(latency)
            by_port[sockets[index]["port"]].append(latency)
    missing = unexpected = 0
    for index, socket in enumerate(sockets):
        want = expected[socket["workspace"]]
        missing += sum((want - got[index]).values())
        unexpected += sum((got[index] - want).values())
    everything = [x for samples in latencies.values() for x in samples]
    return {
        "sockets": len(sockets),
        "expected": sum(sum(expected[s["workspace"]].values()) for s in sockets),
        "received": len(listened["times"]),
        "missing": missing,
        "unexpected_or_late": unexpected,
        "other_frames": other,
        "disconnects": len(listened["disconnects"]),
        "disconnect_reasons": dict(
            Counter(why.split("(")[0] for _, _, why in listened["disconnects"]).most_common(5)
        ),
        "latency_ms": _spread(everything),
        "latency_ms_by_kind": {kind: _spread(s) for kind, s in sorted(latencies.items())},
        "latency_ms_by_web_port": {port: _spread(s) for port, s in sorted(by_port.items())},
    }


def _invariants() -> dict[str, int]:
    """No node or GPU device over capacity, no live pod of an ended workload (every row)."""
    from cluster.models import Node
    from jobs.choices import ENDED_STATUSES, LIVE_POD_STATUSES
    from jobs.models import Pod

    capacity = dict(Node.objects.values_list("pk", "gpus"))
    per_node: Counter[int] = Counter()
    per_device: Counter[tuple[int, int]] = Counter()
    live = Pod.objects.filter(status__in=LIVE_POD_STATUSES, node__isnull=False)
    for node, devices, gpu in live.values_list("node_id", "devices", "workload__gpu"):
        per_node[node] += gpu
        for device in devices:
            per_device[(node, device)] += min(gpu, 1000)
    ended = live.filter(workload__status__in=ENDED_STATUSES).count()
    return {
        "nodes_over_capacity": sum(1 for n, used in per_node.items() if used > capacity[n] * 1000),
        "gpus_over_capacity": sum(1 for used in per_device.values() if used > 1000),
        "live_pods_of_ended_workloads": ended,
    }


def _task_runs(logs: Path, since: float, until: float) -> dict[str, Any]:
    """Durations of the workers' task runs between two times, from their log lines."""
    runs: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for log in sorted(logs.glob("worker*.log")):
        for line in log.read_text(errors="replace").splitlines():
            match = CYCLE_LINE.match(line)
            if match is None:
                continue
            at = time.mktime(time.strptime(match["at"], "%Y-%m-%d %H:%M:%S"))
            at += int(match["ms"]) / 1000
            if since <= at <= until:
                runs[match["task"]].append((float(match["seconds"]), match["result"].strip()))
    cycles = runs.get("scheduling_cycle", [])
    admitting = [s for s, result in cycles if result not in ("0", "None")]
    return {
        "scheduling_cycle_s": {
            **_spread([s for s, _ in cycles], "s"),
            "with_admissions": _spread(admitting, "s"),
        },
        "admitted_by_cycles": sum(int(r) for _, r in cycles if r.isdigit()),
        "backend_sync_s": _spread([s for s, _ in runs.get("backend_sync", [])], "s"),
    }


def _log_errors(logs: Path) -> dict[str, Any]:
    """Tracebacks in the web and worker logs before shutdown, by the exception that ended each."""
    ended: Counter[str] = Counter()
    for log in sorted([*logs.glob("web*.log"), *logs.glob("worker*.log")]):
        text = log.read_text(errors="replace")
        text = re.split(r"Shutting down|Warm shutdown", text, maxsplit=1)[0]  # the run, not down
        lines = [line for line in text.splitlines() if line.strip()]
        for line, after in zip(lines, [*lines[1:], ""], strict=True):
            match = EXCEPTION_LINE.match(line)
            # A chained traceback's earlier exceptions are followed by the one they caused.
            if match and not after.startswith(("The above exception", "During handling")):
                ended[f"{log.stem}: {match[1]}"] += 1
    return {"tracebacks": sum(ended.values()), "by_exception": dict(ended.most_common(8))}


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    """Bring a stack up with `args.web` web processes, load it, measure, bring it down."""
    from tools.servers import postgres_running
    from tools.stack import Stack, StackError, down, log_tail, up

    folder = Path(tempfile.mkdtemp(prefix=f"tidepool-bench-dist-web{args.web}-"))
    stack = Stack(folder)
    web_port, pg_port, redis_port = _ports(args.web)
    try:
        with redirect_stdout(sys.stderr):
            asked = {
                "web": args.web,
                "workers": args.workers,
                "port": web_port,
                "pg_port": pg_port,
                "redis_port": redis_port,
                "start_delay": args.start_delay,
            }
            try:
                config = up(stack, asked)
            except StackError as error:  # what up printed for `make up`, before the folder goes
                raise SystemExit(f"stack: {error}\n{log_tail(error.where)}") from None
        _django(stack.env(config))
        from django.db import connection

        from console.demo import PASSWORDS
        from jobs.models import ControlState
        from workspaces.models import Workspace

        cluster = _grow_cluster(args)
        ports = config.web_ports()
        tokens = {u: token(ports[0], u, PASSWORDS[u]) for u in PERSONAS}
        sessions = {u: session(ports[-1], u, PASSWORDS[u]) for u in PERSONAS}
        workspace_ids = dict(Workspace.objects.values_list("name", "pk"))
        users = list(PERSONAS)
        sockets = []
        for i in range(args.sockets):
            user, port = users[i % 3], ports[(i // 3) % len(ports)]
            sockets.append(
                {
                    "url": f"ws://127.0.0.1:{port}/ws/workspaces/{workspace_ids[PERSONAS[user]]}/",
                    "cookie": f"sessionid={sessions[user]}",
                    "origin": f"http://127.0.0.1:{port}",
                    "workspace": PERSONAS[user],
                    "port": str(port),
                }
            )
        spec, out = folder / "sockets.json", folder / "frames.json"
        spec.write_text(json.dumps(sockets))
        listener = subprocess.Popen(
            [sys.executable, __file__, "listen", str(spec), str(out)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert listener.stdin is not None and listener.stdout is not None
        opened = json.loads(listener.stdout.readline() or "{}")
        print(f"web {args.web}: {opened} sockets; submitting {args.jobs} jobs", file=sys.stderr)

        pg_pid = int((stack.pg_data / "postmaster.pid").read_text().split()[0])
        watched = {**stack.running(), "postgres": pg_pid}
        cpu_before = {name: _tree_cpu(pid) for name, pid in watched.items()}
        listener_before, client_before = cpu_seconds(listener.pid), time.process_time()
        cycles_before = ControlState.objects.values_list("cycles", flat=True).first() or 0
        connection.close()  # idle while the submits run; nothing here competes with them

        began = time.time()
        results = submit_all(ports, tokens, args)
        ended = time.time()

        cpu = {name: _tree_cpu(pid) - cpu_before[name] for name, pid in watched.items()}
        cpu_listener = cpu_seconds(listener.pid) - listener_before
        cpu_client = time.process_time() - client_before
        print(f"web {args.web}: submitted in {ended - began:.1f} s; waiting", file=sys.stderr)
        settled, running = _wait_running(args)
        time.sleep(args.drain)  # pushes of the last changes reach the sockets
        listener.stdin.write("stop\n")
        listener.stdin.flush()
        listener.stdout.readline()
        listener.wait(timeout=60)
        listened = json.loads(out.read_text())
        cycles_after = ControlState.objects.values_list("cycles", flat=True).first() or 0

        ok = [r for r in results if r[2] == 201]
        errors = [r for r in results if r[2] != 201]
        wall = ended - began
        web_cpu = sum(v for k, v in cpu.items() if k.startswith("web"))
        figures: dict[str, Any] = {
            "web_processes": args.web,
            "workers": args.workers,
            "beat": 1,
            "start_delay_s": args.start_delay,
            "cluster": cluster,
            "jobs": args.jobs,
            "clients": args.clients,
            "job_shape": {"replicas": args.replicas, "gpu": args.gpu, "idle_policy": "none"},
            "submit": {
                "wall_s": round(wall, 2),
                "submits_per_s": round(len(ok) / wall, 1),
                **_spread([r[1] for r in results]),
                "errors": len(errors),
                "error_samples": sorted({f"{r[2]} {r[3][:120]}" for r in errors})[:5],
            },
            **_to_running(),
            "all_running": running >= args.jobs,
            "all_running_after_last_submit_s": round(settled - ended, 2),
            **_task_runs(stack.logs, began, settled),
            "cycles_run": cycles_after - cycles_before,
            "events": {
                "connect_failures": opened.get("failures", args.sockets),
                **_events(listened, sockets, settled),
            },
            "cpu_s_while_submitting": {
                **{k: round(v, 1) for k, v in sorted(cpu.items())},
                "bench_clients": round(cpu_client, 1),
                "bench_listener": round(cpu_listener, 1),
                "web_cpu_ms_per_submit": round(1000 * web_cpu / max(1, len(results)), 2),
            },
            "invariants": _invariants(),
            "errors_in_logs": _log_errors(stack.logs),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
        connection.close()
        if args.keep:
            figures["stack_dir"] = str(folder)
        return figures
    finally:
        with redirect_stdout(sys.stderr):
            down(stack)
        if not args.keep and not postgres_running(stack.pg_data):
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--sockets", type=int, default=300)
    parser.add_argument("--web", default="1,2", help="web processes of each run, e.g. 1,2")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--start-delay", type=float, default=5.0)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--gpu", type=float, default=1.0, help="GPUs per replica")
    parser.add_argument("--nodes", type=int, help="8-GPU nodes to add (default: all jobs fit)")
    parser.add_argument("--settle-timeout", type=float, default=600.0)
    parser.add_argument("--drain", type=float, default=3.0, help="s to wait for last pushes")
    parser.add_argument("--keep", action="store_true", help="keep each stack's folder (logs)")
    if sys.argv[1:2] == ["listen"]:
        listen(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1:2] == ["run"]:  # one web count, in a process of its own (its own Django)
        args = parser.parse_args(sys.argv[2:])
        args.web = int(args.web)
        print(json.dumps(one_run(args)))
        return
    args = parser.parse_args()
    load_before = [round(x, 2) for x in os.getloadavg()]
    runs = []
    for web in [int(n) for n in args.web.split(",")]:
        argv = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k != "web"]
        argv = [a for a in argv if not a.endswith(("=None", "=False"))]
        argv = [a.removesuffix("=True") for a in argv]
        done = subprocess.run(
            [sys.executable, __file__, "run", *argv, f"--web={web}"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0 or not done.stdout.strip():
            runs.append({"web_processes": web, "failed": f"exit status {done.returncode}"})
            continue
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    rates = {r["web_processes"]: r["submit"]["submits_per_s"] for r in runs if "submit" in r}
    report: dict[str, Any] = {
        "bench": "distributed: PostgreSQL 15, Redis, uvicorn web processes, Celery workers "
        "and beat, simulated cluster (tools/stack.py)",
        "machine": {"cpus": os.cpu_count(), "load_average_before": load_before},
        "runs": runs,
        "submits_per_s_by_web_processes": rates,
        "today": TODAY,
        "goals": {
            "submits_per_s_with_2_web": 200,
            "submit_p95_ms": 250,
            "submit_to_running_p95_s": args.start_delay + 2,
            "event_p95_ms": 250,
            "invariant_violations": 0,
        },
    }
    if len(rates) > 1 and rates[min(rates)]:
        report["submits_per_s_most_over_fewest_web"] = round(
            rates[max(rates)] / rates[min(rates)], 2
        )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
