"""`tidepool service …`: inference services and their scheduled scaling rules."""

from __future__ import annotations

from typing import Any

import click

from console.cli.client import Client, CLIError, complete_names
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

SERVICE_HEADER = ["NAME", "WORKSPACE", "REPLICAS", "MIN", "MAX", "STATUS"]
RULE_HEADER = ["NAME", "CRON", "TIMEZONE", "TARGET", "EXCLUDE", "ENABLED", "LAST FIRED"]

SERVICES = complete_names("services/")


def _service_row(s: dict[str, Any]) -> list[Any]:
    return [
        s["name"],
        s["workspace"],
        s["replicas"],
        s["min_replicas"],
        s["max_replicas"],
        s["status"],
    ]


def _rule_row(r: dict[str, Any]) -> list[Any]:
    return [
        r["name"],
        r["cron"],
        r["timezone"],
        r["target_replicas"],
        r["exclude_cron"] or "-",
        "yes" if r["enabled"] else "no",
        r["last_fired_at"] or "-",
    ]


def _service_id(client: Client, name: str, workspace: str | None) -> int:
    return int(client.one("services/", "service", name, workspace=workspace)["id"])


@click.group()
def service() -> None:
    """Inference services: list, create, scale, stop, and scheduled scaling rules."""


@service.command("ls")
@click.option("--workspace", help="Only this workspace's.")
@click.option("--status", help="Only services in this status.")
@click.option("--quota", help="Only this quota's (name or id).")
@output_options
def service_ls(**filters: str | None) -> None:
    """The inference services you may see."""
    rows = Client.from_config().all("services/", **filters)
    emit(rows, [_service_row(s) for s in rows], SERVICE_HEADER)


@service.command("show")
@click.argument("name", shell_complete=SERVICES)
@workspace_option
@output_options
def service_show(name: str, workspace: str | None) -> None:
    """One service: its settings, pods and event timeline."""
    detail = find(Client.from_config(), "services/", "service", name, workspace)
    show(detail, [("min..max replicas", f"{detail['min_replicas']}..{detail['max_replicas']}")])


@service.command("create")
@click.argument("name")
@submit_options
@click.option("--min-replicas", type=int, default=1, show_default=True)
@click.option("--max-replicas", type=int, help="Defaults to --replicas.")
@click.option("--command", "command_line", help="The command the container runs.")
@output_options
def service_create(
    name: str,
    min_replicas: int,
    max_replicas: int | None,
    command_line: str | None,
    **shape: Any,
) -> None:
    """Create an inference service NAME; --replicas is its first target."""
    body = submit_body(name=name, **shape)
    body["min_replicas"] = min_replicas
    if max_replicas is not None:
        body["max_replicas"] = max_replicas
    if command_line:
        body["command"] = command_line
    answer = Client.from_config().post("services/", body)
    emit(answer, [workload_row(answer)], WORKLOAD_HEADER)


@service.command("scale")
@click.argument("name", shell_complete=SERVICES)
@click.argument("replicas", type=int)
@workspace_option
@output_options
def service_scale(name: str, replicas: int, workspace: str | None) -> None:
    """Set a service's target replicas; the next scheduling cycle acts on it."""
    client = Client.from_config()
    answer = client.post(
        f"services/{_service_id(client, name, workspace)}/scale/", {"replicas": replicas}
    )
    emit(answer, [_service_row(answer)], SERVICE_HEADER)


@service.command("stop")
@click.argument("name", shell_complete=SERVICES)
@workspace_option
@output_options
def service_stop(name: str, workspace: str | None) -> None:
    """Stop serving: the service ends Cancelled."""
    client = Client.from_config()
    answer = client.post(f"services/{_service_id(client, name, workspace)}/cancel/")
    emit(answer, [_service_row(answer)], SERVICE_HEADER)


@service.command("logs")
@click.argument("name", shell_complete=SERVICES)
@workspace_option
@logs_options
def service_logs(name: str, workspace: str | None, **options: Any) -> None:
    """A replica's container log."""
    workload_logs("services/", "service", name, workspace, **options)


@service.group("rules")
def rules() -> None:
    """Scheduled scaling rules: at each cron time, set the target replicas."""


@rules.command("ls")
@click.argument("service_name", metavar="SERVICE", shell_complete=SERVICES)
@workspace_option
@output_options
def rules_ls(service_name: str, workspace: str | None) -> None:
    """A service's scaling rules."""
    client = Client.from_config()
    found = client.all(f"services/{_service_id(client, service_name, workspace)}/rules/")
    emit(found, [_rule_row(r) for r in found], RULE_HEADER)


@rules.command("add")
@click.argument("service_name", metavar="SERVICE", shell_complete=SERVICES)
@click.argument("rule_name", metavar="RULE")
@click.option("--cron", required=True, help='When it fires, e.g. "0 8 * * 1-5".')
@click.option("--target", type=int, required=True, help="Replicas it sets.")
@click.option("--timezone", default="UTC", show_default=True)
@click.option("--exclude-cron", default="", help="Times it does not fire.")
@click.option("--disabled", is_flag=True, help="Add it switched off.")
@workspace_option
@output_options
def rules_add(
    service_name: str,
    rule_name: str,
    cron: str,
    target: int,
    timezone: str,
    exclude_cron: str,
    disabled: bool,
    workspace: str | None,
) -> None:
    """Add a scaling rule RULE to SERVICE."""
    client = Client.from_config()
    body = {
        "name": rule_name,
        "cron": cron,
        "timezone": timezone,
        "target_replicas": target,
        "exclude_cron": exclude_cron,
        "enabled": not disabled,
    }
    answer = client.post(f"services/{_service_id(client, service_name, workspace)}/rules/", body)
    emit(answer, [_rule_row(answer)], RULE_HEADER)


@rules.command("rm")
@click.argument("service_name", metavar="SERVICE", shell_complete=SERVICES)
@click.argument("rule_name", metavar="RULE")
@workspace_option
def rules_rm(service_name: str, rule_name: str, workspace: str | None) -> None:
    """Delete the scaling rule RULE of SERVICE."""
    client = Client.from_config()
    path = f"services/{_service_id(client, service_name, workspace)}/rules/"
    ids = [r["id"] for r in client.all(path) if r["name"] == rule_name]
    if not ids:
        raise CLIError(f"Service {service_name} has no rule named {rule_name!r}.")
    client.delete(f"{path}{ids[0]}/")
    click.echo(f"Deleted rule {rule_name} of {service_name}.")
