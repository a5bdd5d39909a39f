"""`tidepool`: a command line over the REST API (standard library only).

    tidepool login URL [--username U --password P]
    tidepool quota ls | scale NAME --gpu N | rebalance --from A --to B --gpu N
    tidepool job submit --workspace W --gpus N [--replicas R --idle P --priority N] NAME
    tidepool job ls | logs-events NAME
    tidepool service scale NAME REPLICAS

Tables for people, ``--json`` for scripts. An error prints the API's message and exits 1.
The token lives in ~/.config/tidepool/config.json (or the file TIDEPOOL_CONFIG names).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO


class CLIError(Exception):
    """What the user is told before the command exits non-zero."""


def config_path() -> Path:
    """Where the URL and token are kept."""
    override = os.environ.get("TIDEPOOL_CONFIG")
    if override:
        return Path(override)
    return Path.home() / ".config" / "tidepool" / "config.json"


def load_config() -> dict[str, str]:
    """The saved URL and token; an error when not logged in."""
    path = config_path()
    if not path.exists():
        raise CLIError("Not logged in: run `tidepool login URL` first.")
    data: dict[str, str] = json.loads(path.read_text())
    return data


def save_config(data: dict[str, str]) -> None:
    """Save the URL and token, readable by the user only."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    path.chmod(0o600)


def error_message(body: Any) -> str:
    """The API's error as one line per field: ``gpu: …``."""
    if isinstance(body, dict):
        if "detail" in body and len(body) == 1:
            return str(body["detail"])
        lines = []
        for key, value in body.items():
            messages = value if isinstance(value, list) else [value]
            for message in messages:
                text = error_message(message) if isinstance(message, dict) else str(message)
                lines.append(text if key == "non_field_errors" else f"{key}: {text}")
        return "\n".join(lines)
    return str(body)


class Client:
    """JSON over HTTP to /api/v1/ with the saved token."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.base = url.rstrip("/") + "/api/v1/"
        self.token = token

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[Any, dict[str, str]]:
        """Send one request; raise CLIError with the API's message on 4xx/5xx."""
        url = path if path.startswith("http") else self.base + path.lstrip("/")
        if params:
            query = {k: v for k, v in params.items() if v is not None}
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Token {self.token}")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
                answer = json.loads(raw) if raw else None
                return answer, dict(response.headers)
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")[:300] or err.reason
            raise CLIError(f"{error_message(body)} (HTTP {err.code})") from None
        except urllib.error.URLError as err:
            raise CLIError(f"Cannot reach {self.base}: {err.reason}") from None

    def get(self, path: str, **params: Any) -> Any:
        """GET and return the JSON body."""
        return self.request("GET", path, params=params)[0]

    def post(self, path: str, body: Any, **kwargs: Any) -> Any:
        """POST JSON and return the JSON body."""
        return self.request("POST", path, body, **kwargs)[0]

    def all(self, path: str, **params: Any) -> list[dict[str, Any]]:
        """Every row of a paginated list."""
        page = self.get(path, **params)
        rows = list(page["results"])
        while page.get("next"):
            page = self.get(page["next"])
            rows.extend(page["results"])
        return rows

    def one(self, path: str, what: str, name: str, **params: Any) -> dict[str, Any]:
        """The single row named `name` (by the list's ``name`` filter)."""
        rows = self.all(path, name=name, **params)
        if not rows:
            raise CLIError(f"No {what} named {name!r}.")
        if len(rows) > 1:
            places = ", ".join(sorted(str(r.get("workspace")) for r in rows))
            raise CLIError(f"Several {what}s are named {name!r} ({places}): add --workspace.")
        return rows[0]


def table(rows: list[list[Any]], header: list[str], out: TextIO) -> None:
    """Left-aligned columns."""
    cells = [header] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def emit(args: argparse.Namespace, data: Any, rows: list[list[Any]], header: list[str]) -> None:
    """JSON for scripts, a table for people."""
    if args.json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        table(rows, header, sys.stdout)


def _gpu_min(quota: dict[str, Any]) -> str:
    return " ".join(f"{r['min']['gpu']}" for r in quota["resources"]) or "0"


def _gpu_max(quota: dict[str, Any]) -> str:
    values = [r["max"]["gpu"] for r in quota["resources"]]
    return " ".join("∞" if v is None else str(v) for v in values) or "∞"


def _quota_row(quota: dict[str, Any]) -> list[Any]:
    usage = quota["usage"]
    return [
        quota["name"],
        quota["parent"] or "-",
        _gpu_min(quota),
        _gpu_max(quota),
        usage["in_quota"],
        usage["borrowed"],
        usage["pending"],
        "on" if quota["child_preemption"] else "off",
        quota["version"],
    ]


QUOTA_HEADER = [
    "NAME",
    "PARENT",
    "GPU MIN",
    "GPU MAX",
    "IN QUOTA",
    "BORROWED",
    "PENDING",
    "CHILD PREEMPTION",
    "VERSION",
]
JOB_HEADER = ["ID", "NAME", "WORKSPACE", "QUOTA", "STATUS", "IN QUOTA", "GPUS", "PENDING REASON"]


def _job_row(job: dict[str, Any]) -> list[Any]:
    in_quota = {True: "yes", False: "no", None: "-"}[job["in_quota"]]
    gpus = job["gpu"] * job["replicas"]
    return [
        job["id"],
        job["name"],
        job["workspace"],
        job["quota"],
        job["status"],
        in_quota,
        gpus,
        job["pending_reason"],
    ]


def _event_row(event: dict[str, Any]) -> list[Any]:
    """A timeline entry. One about borrowed capacity names no node in its message; the API
    gives its nodes in its data to platform admins only, and they are shown after it."""
    data = event.get("data") or {}
    nodes = [str(n) for n in data.get("nodes") or []] + (
        [str(data["node"])] if data.get("node") else []
    )
    message = event["message"]
    if data.get("borrowed") and nodes:
        message = f"{message} ({', '.join(nodes)})"
    return [event["at"], event["kind"], message]


# Commands ---------------------------------------------------------------------------------------


def cmd_login(args: argparse.Namespace) -> None:
    """Exchange a username and password for a token and save it."""
    username = args.username or input("Username: ")
    password = args.password or getpass.getpass("Password: ")
    client = Client(args.url)
    answer = client.post("auth/token/", {"username": username, "password": password})
    save_config({"url": args.url, "token": answer["token"], "username": username})
    sys.stdout.write(f"Logged in to {args.url} as {username}.\n")


def _client() -> Client:
    config = load_config()
    return Client(config["url"], config.get("token"))


def cmd_quota_ls(args: argparse.Namespace) -> None:
    """Quotas in tree order."""
    client = _client()
    roots = client.get("quotas/", view="tree")["results"]
    flat: list[tuple[int, dict[str, Any]]] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        flat.append((depth, node))
        for child in node.get("children", []):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    rows = []
    for depth, quota in flat:
        row = _quota_row(quota)
        row[0] = "  " * depth + row[0]
        rows.append(row)
    emit(args, roots, rows, QUOTA_HEADER)


def cmd_quota_scale(args: argparse.Namespace) -> None:
    """Set a quota's guaranteed GPUs on one node pool (its only one by default)."""
    client = _client()
    quota = client.one("quotas/", "quota", args.name)
    pools = [r["node_pool"] for r in quota["resources"]]
    node_pool = args.node_pool or (pools[0] if len(pools) == 1 else None)
    if node_pool is None:
        raise CLIError(f"{args.name} has {len(pools)} node pools: add --node-pool.")
    resources = [{"node_pool": node_pool, "min": {"gpu": args.gpu}}]
    if args.max_gpu is not None:
        resources[0]["max"] = {"gpu": None if args.max_gpu == "none" else args.max_gpu}
    answer = client.post(
        f"quotas/{quota['id']}/scale/",
        {"resources": resources},
        headers={"If-Match": f'"{quota["version"]}"'},
    )
    emit(args, answer, [_quota_row(answer)], QUOTA_HEADER)


def cmd_quota_rebalance(args: argparse.Namespace) -> None:
    """Move guaranteed GPUs from one quota to a sibling."""
    client = _client()
    body: dict[str, Any] = {"from": args.source, "to": args.target, "gpu": args.gpu}
    if args.node_pool:
        body["node_pool"] = args.node_pool
    answer = client.post("quotas/rebalance/", body)
    rows = [_quota_row(answer["source"]), _quota_row(answer["target"])]
    emit(args, answer, rows, QUOTA_HEADER)


def cmd_job_submit(args: argparse.Namespace) -> None:
    """Submit a training job."""
    client = _client()
    body: dict[str, Any] = {
        "workspace": args.workspace,
        "name": args.name,
        "gpu": args.gpus,
        "replicas": args.replicas,
        "priority": args.priority,
        "idle_policy": args.idle,
    }
    if args.quota:
        body["quota"] = args.quota
    answer = client.post("jobs/", body)
    emit(args, answer, [_job_row(answer)], JOB_HEADER)


def cmd_job_ls(args: argparse.Namespace) -> None:
    """Training jobs the user may see."""
    client = _client()
    jobs = client.all("jobs/", workspace=args.workspace, status=args.status, quota=args.quota)
    emit(args, jobs, [_job_row(j) for j in jobs], JOB_HEADER)


def cmd_job_events(args: argparse.Namespace) -> None:
    """A job's pods and event timeline."""
    client = _client()
    job = client.one("jobs/", "job", args.name, workspace=args.workspace)
    detail = client.get(f"jobs/{job['id']}/")
    rows = [_event_row(e) for e in detail["events"]]
    emit(args, detail["events"], rows, ["AT", "KIND", "MESSAGE"])


def cmd_service_scale(args: argparse.Namespace) -> None:
    """Set an inference service's target replicas."""
    client = _client()
    service = client.one("services/", "service", args.name, workspace=args.workspace)
    answer = client.post(f"services/{service['id']}/scale/", {"replicas": args.replicas})
    rows = [[answer["name"], answer["workspace"], answer["replicas"], answer["status"]]]
    emit(args, answer, rows, ["NAME", "WORKSPACE", "REPLICAS", "STATUS"])


def parser() -> argparse.ArgumentParser:
    """The command line."""
    top = argparse.ArgumentParser(prog="tidepool", description="Tidepool from the command line.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    commands = top.add_subparsers(dest="command", required=True)

    login = commands.add_parser("login", parents=[common], help="log in and save a token")
    login.add_argument("url")
    login.add_argument("--username")
    login.add_argument("--password")
    login.set_defaults(func=cmd_login)

    quota = commands.add_parser("quota", help="resource quotas").add_subparsers(
        dest="action", required=True
    )
    quota.add_parser("ls", parents=[common]).set_defaults(func=cmd_quota_ls)
    scale = quota.add_parser("scale", parents=[common])
    scale.add_argument("name")
    scale.add_argument("--gpu", required=True, help="guaranteed GPUs (min)")
    scale.add_argument("--max-gpu", help="limit in GPUs, or none")
    scale.add_argument("--node-pool")
    scale.set_defaults(func=cmd_quota_scale)
    rebalance = quota.add_parser("rebalance", parents=[common])
    rebalance.add_argument("--from", dest="source", required=True)
    rebalance.add_argument("--to", dest="target", required=True)
    rebalance.add_argument("--gpu", required=True)
    rebalance.add_argument("--node-pool")
    rebalance.set_defaults(func=cmd_quota_rebalance)

    job = commands.add_parser("job", help="training jobs").add_subparsers(
        dest="action", required=True
    )
    submit = job.add_parser("submit", parents=[common])
    submit.add_argument("name")
    submit.add_argument("--workspace", required=True)
    submit.add_argument("--quota")
    submit.add_argument("--gpus", required=True, help="GPUs per replica")
    submit.add_argument("--replicas", type=int, default=1)
    submit.add_argument("--idle", default="none", help="none, acceptable or idle_only")
    submit.add_argument("--priority", type=int, default=5)
    submit.set_defaults(func=cmd_job_submit)
    ls = job.add_parser("ls", parents=[common])
    ls.add_argument("--workspace")
    ls.add_argument("--status")
    ls.add_argument("--quota")
    ls.set_defaults(func=cmd_job_ls)
    events = job.add_parser("logs-events", parents=[common])
    events.add_argument("name")
    events.add_argument("--workspace")
    events.set_defaults(func=cmd_job_events)

    service = commands.add_parser("service", help="inference services").add_subparsers(
        dest="action", required=True
    )
    sscale = service.add_parser("scale", parents=[common])
    sscale.add_argument("name")
    sscale.add_argument("replicas", type=int)
    sscale.add_argument("--workspace")
    sscale.set_defaults(func=cmd_service_scale)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; 0 on success, 1 with the API's message on stderr otherwise."""
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except CLIError as err:
        sys.stderr.write(f"error: {err}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
