"""`tidepool instance …`: interactive instances (In Quota only, never preempted)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import click

from console.cli.client import Client, complete_names
from console.cli.logs import logs_options, workload_logs
from console.cli.output import emit, output_options
from console.cli.workloads import (
    WORKLOAD_HEADER,
    find,
    show,
    submit_body,
    submit_options,
    workload_row,
    workspace_option,
)

INSTANCE_HEADER = [*WORKLOAD_HEADER, "MAX DURATION (S)"]

INSTANCES = complete_names("instances/")


def _instance_row(w: dict[str, Any]) -> list[Any]:
    return [*workload_row(w), w["max_duration"] or "-"]


@click.group()
def instance() -> None:
    """Interactive instances: start, list, read, stop, open in the console."""


@instance.command("start")
@click.argument("name")
@submit_options
@click.option(
    "--max-duration", type=int, help="Seconds (default: the workspace's default duration)."
)
@click.option("--idle-stop-minutes", type=int, help="Stop after this many idle minutes.")
@output_options
def instance_start(
    name: str, max_duration: int | None, idle_stop_minutes: int | None, **shape: Any
) -> None:
    """Start an interactive instance NAME."""
    body = submit_body(name=name, **shape)
    if max_duration is not None:
        body["max_duration"] = max_duration
    if idle_stop_minutes is not None:
        body["idle_stop_minutes"] = idle_stop_minutes
    answer = Client.from_config().post("instances/", body)
    emit(answer, [_instance_row(answer)], INSTANCE_HEADER)


@instance.command("ls")
@click.option("--workspace", help="Only this workspace's.")
@click.option("--status", help="Only instances in this status.")
@click.option("--owner", help="Only this user's.")
@output_options
def instance_ls(**filters: str | None) -> None:
    """The interactive instances you may see."""
    rows = Client.from_config().all("instances/", **filters)
    emit(rows, [_instance_row(w) for w in rows], INSTANCE_HEADER)


@instance.command("show")
@click.argument("name", shell_complete=INSTANCES)
@workspace_option
@output_options
def instance_show(name: str, workspace: str | None) -> None:
    """One instance: its limits, pods and event timeline."""
    detail = find(Client.from_config(), "instances/", "instance", name, workspace)
    show(
        detail,
        [
            ("max duration (s)", detail["max_duration"] or "-"),
            ("idle stop (min)", detail["idle_stop_minutes"] or "-"),
        ],
    )


@instance.command("stop")
@click.argument("name", shell_complete=INSTANCES)
@workspace_option
@output_options
def instance_stop(name: str, workspace: str | None) -> None:
    """Stop an instance."""
    client = Client.from_config()
    found = client.one("instances/", "instance", name, workspace=workspace)
    answer = client.post(f"instances/{found['id']}/stop/")
    emit(answer, [_instance_row(answer)], INSTANCE_HEADER)


@instance.command("open")
@click.argument("name", shell_complete=INSTANCES)
@workspace_option
@click.option("--print", "print_only", is_flag=True, help="Print the address; open nothing.")
def instance_open(name: str, workspace: str | None, print_only: bool) -> None:
    """Open an instance's page in the console, whose Open link reaches it while it runs.

    The link itself is the backend's (a placeholder in the simulator, the URL template on
    Kubernetes), and the page shows it only while the instance runs.
    """
    client = Client.from_config()
    found = client.one("instances/", "instance", name, workspace=workspace)
    url = f"{client.url}/workspaces/{quote(found['workspace'])}/instances/{found['id']}/"
    click.echo(url)
    if not print_only:
        click.launch(url)


@instance.command("logs")
@click.argument("name", shell_complete=INSTANCES)
@workspace_option
@logs_options
def instance_logs(name: str, workspace: str | None, **options: Any) -> None:
    """The instance's container log."""
    workload_logs("instances/", "instance", name, workspace, **options)
