"""`tidepool workspace …`: workspaces, their members and bound quotas."""

from __future__ import annotations

from typing import Any

import click

from console.cli.client import Client, CLIError, complete_names
from console.cli.output import emit, gpus, output_format, output_options, table

ROLES = ("admin", "developer", "operator", "viewer")

WORKSPACES = complete_names("workspaces/")


def _workspace(client: Client, name: str) -> dict[str, Any]:
    """The workspace named `name`, among those the user may see."""
    return client.one("workspaces/", "workspace", name)


def _workspace_row(ws: dict[str, Any]) -> list[Any]:
    return [ws["name"], len(ws["members"]), ", ".join(ws["quotas"]) or "-", ws["description"]]


@click.group()
def workspace() -> None:
    """Workspaces: members and their roles, bound quotas."""


@workspace.command("ls")
@output_options
def workspace_ls() -> None:
    """The workspaces you are in (every one for platform admins)."""
    rows = Client.from_config().all("workspaces/")
    emit(rows, [_workspace_row(w) for w in rows], ["NAME", "MEMBERS", "QUOTAS", "DESCRIPTION"])


@workspace.command("show")
@click.argument("name", shell_complete=WORKSPACES)
@output_options
def workspace_show(name: str) -> None:
    """One workspace: members, bound quotas, Resource Usage rules and time limits."""
    ws = _workspace(Client.from_config(), name)
    if output_format() != "table":
        emit(ws, [], [])
        return
    limits = [
        ("name", ws["name"]),
        ("description", ws["description"] or "-"),
        ("quotas", ", ".join(ws["quotas"]) or "-"),
        ("instance default duration (s)", ws["instance_default_duration"] or "-"),
        ("instance max duration (s)", ws["instance_max_duration"] or "-"),
    ]
    click.echo(table([list(p) for p in limits], ["FIELD", "VALUE"]))
    click.echo(table([[m["user"], m["role"]] for m in ws["members"]], ["MEMBER", "ROLE"]))
    rules = [
        [r["quota"], r["role"], gpus(r["max_gpus"]), r["max_priority"] or "-"]
        for r in ws["resource_usage"]
    ]
    click.echo(table(rules, ["QUOTA", "ROLE", "MAX GPUS", "MAX PRIORITY"]), nl=False)


@workspace.group("members")
def members() -> None:
    """A workspace's members (adding and removing needs manage on it)."""


@members.command("ls")
@click.argument("workspace_name", metavar="WORKSPACE", shell_complete=WORKSPACES)
@output_options
def members_ls(workspace_name: str) -> None:
    """The members of a workspace and their roles."""
    client = Client.from_config()
    rows = client.all(f"workspaces/{_workspace(client, workspace_name)['id']}/members/")
    emit(rows, [[m["user"], m["role"]] for m in rows], ["USER", "ROLE"])


@members.command("add")
@click.argument("workspace_name", metavar="WORKSPACE", shell_complete=WORKSPACES)
@click.argument("username")
@click.option("--role", type=click.Choice(ROLES), default="developer", show_default=True)
@output_options
def members_add(workspace_name: str, username: str, role: str) -> None:
    """Add a member, or change an existing member's role."""
    client = Client.from_config()
    ws = _workspace(client, workspace_name)
    answer = client.post(f"workspaces/{ws['id']}/members/", {"user": username, "role": role})
    emit(answer, [[answer["user"], answer["role"]]], ["USER", "ROLE"])


@members.command("rm")
@click.argument("workspace_name", metavar="WORKSPACE", shell_complete=WORKSPACES)
@click.argument("username")
def members_rm(workspace_name: str, username: str) -> None:
    """Remove a member."""
    client = Client.from_config()
    ws = _workspace(client, workspace_name)
    client.delete(f"workspaces/{ws['id']}/members/{username}/")
    click.echo(f"Removed {username} from {workspace_name}.")


@workspace.command("bind")
@click.argument("workspace_name", metavar="WORKSPACE", shell_complete=WORKSPACES)
@click.argument("quota")
@output_options
def workspace_bind(workspace_name: str, quota: str) -> None:
    """Let a workspace submit to a quota (platform admins)."""
    client = Client.from_config()
    ws = _workspace(client, workspace_name)
    answer = client.post(f"workspaces/{ws['id']}/quotas/", {"quota": quota})
    emit(answer, [[workspace_name, answer["quota"]]], ["WORKSPACE", "QUOTA"])


@workspace.command("unbind")
@click.argument("workspace_name", metavar="WORKSPACE", shell_complete=WORKSPACES)
@click.argument("quota")
def workspace_unbind(workspace_name: str, quota: str) -> None:
    """Take a quota from a workspace, with its Resource Usage rules (platform admins)."""
    client = Client.from_config()
    ws = _workspace(client, workspace_name)
    bound = {b["quota"]: b["quota_id"] for b in client.all(f"workspaces/{ws['id']}/quotas/")}
    if quota not in bound:
        raise CLIError(f"Workspace {workspace_name} has no quota named {quota!r}.")
    client.delete(f"workspaces/{ws['id']}/quotas/{bound[quota]}/")
    click.echo(f"Unbound {quota} from {workspace_name}.")
