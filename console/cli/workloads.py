"""What jobs, services and instances share: finding one by name, rows, the detail view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from console.cli.client import Client, complete_names
from console.cli.output import emit, output_format, table, yes_no

F = TypeVar("F", bound=Callable[..., Any])


def workload_row(w: dict[str, Any]) -> list[Any]:
    """A workload as a list row; GPUS is replicas × GPUs per replica."""
    return [
        w["id"],
        w["name"],
        w["workspace"],
        w["quota"],
        w["status"],
        yes_no(w["in_quota"]),
        w["replicas"],
        w["gpu"] * w["replicas"],
        w["pending_reason"],
    ]


WORKLOAD_HEADER = [
    "ID",
    "NAME",
    "WORKSPACE",
    "QUOTA",
    "STATUS",
    "IN QUOTA",
    "REPLICAS",
    "GPUS",
    "PENDING REASON",
]


def event_row(event: dict[str, Any]) -> list[Any]:
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


EVENT_HEADER = ["AT", "KIND", "MESSAGE"]


def pod_row(pod: dict[str, Any]) -> list[Any]:
    """A replica; a member reading a borrowed pod gets no node (the API leaves it null)."""
    node = pod["node"] or ("borrowed capacity" if pod["borrowed"] else "-")
    return [pod["name"], pod["status"], node, yes_no(pod["borrowed"]), pod["reason"] or ""]


def workspace_option(command: F) -> F:
    """``--workspace``: which workspace's workload, when several share the name."""
    return click.option(
        "--workspace",
        shell_complete=complete_names("workspaces/"),
        help="The workload's workspace (when several share its name).",
    )(command)


def find(client: Client, path: str, what: str, name: str, workspace: str | None) -> Any:
    """The workload `name` of this kind, as its detail (pods and events) shows it."""
    found = client.one(path, what, name, workspace=workspace)
    return client.get(f"{path}{found['id']}/")


def show(detail: dict[str, Any], extra: list[tuple[str, Any]]) -> None:
    """A workload: its fields, pods and timeline (JSON and YAML: the API's body)."""
    if output_format() != "table":
        emit(detail, [], [])
        return
    pairs = [
        ("id", detail["id"]),
        ("name", detail["name"]),
        ("workspace", detail["workspace"]),
        ("quota", detail["quota"]),
        ("owner", detail["owner"]),
        ("status", detail["status"]),
        ("status reason", detail["status_reason"] or "-"),
        ("pending reason", detail["pending_reason"] or "-"),
        ("in quota", yes_no(detail["in_quota"])),
        ("replicas", detail["replicas"]),
        ("gpu per replica", detail["gpu"]),
        ("priority", detail["priority"]),
        ("node pools", ", ".join(detail["node_pools"]) or "-"),
        *extra,
        ("submitted", detail["submitted_at"]),
    ]
    click.echo(table([list(p) for p in pairs], ["FIELD", "VALUE"]))
    pods = [pod_row(p) for p in detail["pods"]]
    click.echo(table(pods, ["POD", "STATUS", "NODE", "BORROWED", "REASON"]))
    click.echo(table([event_row(e) for e in detail["events"]], EVENT_HEADER), nl=False)


def submit_body(
    *,
    workspace: str,
    name: str,
    quota: str | None,
    gpus: str,
    replicas: int,
    priority: int,
    cpu: int,
    memory: int,
    node_pools: tuple[str, ...],
    image: str | None,
) -> dict[str, Any]:
    """What every submit sends."""
    body: dict[str, Any] = {
        "workspace": workspace,
        "name": name,
        "gpu": gpus,
        "replicas": replicas,
        "priority": priority,
        "cpu": cpu,
        "memory": memory,
    }
    if quota:
        body["quota"] = quota
    if node_pools:
        body["node_pools"] = list(node_pools)
    if image:
        body["image"] = image
    return body


def submit_options(command: F) -> F:
    """The options of every submit: workspace, quota, shape, priority, node pools, image."""
    options = [
        click.option(
            "--workspace",
            required=True,
            shell_complete=complete_names("workspaces/"),
            help="Workspace to submit in.",
        ),
        click.option("--quota", help="Defaults to the only quota your role may use there."),
        click.option("--gpus", required=True, help="GPUs per replica (below 1 shares a GPU)."),
        click.option("--replicas", type=int, default=1, show_default=True),
        click.option("--priority", type=int, default=5, show_default=True, help="1-9."),
        click.option("--cpu", type=int, default=0, help="Millicores per replica."),
        click.option("--memory", type=int, default=0, help="MiB per replica."),
        click.option(
            "--node-pool", "node_pools", multiple=True, help="Accepted node pool (repeat)."
        ),
        click.option("--image", help="Container image."),
    ]
    for option in reversed(options):
        command = option(command)
    return command
