"""`tidepool quota …`: the quota tree (platform admins; others see none)."""

from __future__ import annotations

from typing import Any

import click

from console.cli.client import Client, CLIError, complete_names
from console.cli.output import emit, gpus, output_format, output_options, table

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

QUOTAS = complete_names("quotas/")


def quota_row(quota: dict[str, Any]) -> list[Any]:
    """A quota as one table row; GPU amounts per node pool, space separated."""
    usage = quota["usage"]
    resources = quota["resources"]
    return [
        quota["name"],
        quota["parent"] or "-",
        " ".join(str(r["min"]["gpu"]) for r in resources) or "0",
        " ".join(gpus(r["max"]["gpu"]) for r in resources) or "∞",
        usage["in_quota"],
        usage["borrowed"],
        usage["pending"],
        "on" if quota["child_preemption"] else "off",
        quota["version"],
    ]


def _quota(client: Client, name: str) -> dict[str, Any]:
    """The quota named `name` (a platform admin's lists are the only ones with quotas)."""
    return client.one("quotas/", "quota", name)


def _if_match(quota: dict[str, Any]) -> dict[str, str]:
    """The version the command read: the server answers 412 if it changed since."""
    return {"If-Match": f'"{quota["version"]}"'}


def _node_pool(quota: dict[str, Any], given: str | None) -> str:
    """The node pool named, or the quota's only one."""
    if given:
        return given
    pools = [r["node_pool"] for r in quota["resources"]]
    if len(pools) != 1:
        raise CLIError(f"{quota['name']} has {len(pools)} node pools: add --node-pool.")
    return str(pools[0])


def _number_or_none(value: str | None) -> float | None:
    """A number, or None for ``none`` (no limit, no weight)."""
    if value is None or value.lower() in ("none", "inf", "∞"):
        return None
    try:
        return float(value) if "." in value else int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number or 'none'.") from None


def _show_quota(quota: dict[str, Any]) -> None:
    """A quota's settings, then its amounts per node pool."""
    if output_format() != "table":
        emit(quota, [], [])
        return
    pairs = [
        ("name", quota["name"]),
        ("parent", quota["parent"] or "-"),
        ("resource pool", quota["resource_pool"]),
        ("child preemption", "on" if quota["child_preemption"] else "off"),
        ("lend idle", "on" if quota["lend_idle"] else "off"),
        ("over-quota weight", quota["over_quota_weight"] or "-"),
        ("queue strategy", quota["queue_strategy"]),
        ("allowed node pools", ", ".join(quota["allowed_node_pools"]) or "any"),
        (
            "usage (GPUs)",
            "{in_quota} in quota, {borrowed} borrowed, {pending} pending".format(**quota["usage"]),
        ),
        ("version", quota["version"]),
    ]
    click.echo(table([[k, v] for k, v in pairs], ["FIELD", "VALUE"]))
    rows = [
        [
            r["node_pool"],
            r["min"]["gpu"],
            gpus(r["max"]["gpu"]),
            r["min"]["cpu"],
            gpus(r["max"]["cpu"]),
            r["min"]["memory"],
            gpus(r["max"]["memory"]),
        ]
        for r in quota["resources"]
    ]
    header = ["NODE POOL", "GPU MIN", "GPU MAX", "CPU MIN", "CPU MAX", "MEM MIN", "MEM MAX"]
    click.echo(table(rows, header), nl=False)


@click.group()
def quota() -> None:
    """Resource quotas: the tree, amounts, settings and audit log (platform admins)."""


@quota.command("ls")
@output_options
def quota_ls() -> None:
    """Quotas in tree order (JSON: the roots with their children nested)."""
    roots = Client.from_config().get("quotas/", view="tree")["results"]
    rows: list[list[Any]] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        row = quota_row(node)
        row[0] = "  " * depth + row[0]
        rows.append(row)
        for child in node.get("children", []):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    emit(roots, rows, QUOTA_HEADER)


@quota.command("show")
@click.argument("name", shell_complete=QUOTAS)
@output_options
def quota_show(name: str) -> None:
    """One quota: settings, amounts per node pool, live usage."""
    client = Client.from_config()
    _show_quota(client.get(f"quotas/{_quota(client, name)['id']}/"))


@quota.command("create")
@click.argument("name")
@click.option("--parent", shell_complete=QUOTAS, help="Parent quota (omit for a root quota).")
@click.option("--resource-pool", help="A root quota's resource pool (a child takes its parent's).")
@click.option("--gpu", help="Guaranteed GPUs (min) on the node pool.")
@click.option("--max-gpu", help="Limit in GPUs, or none.")
@click.option("--node-pool", help="Node pool of --gpu/--max-gpu.")
@click.option("--child-preemption/--no-child-preemption", default=False, show_default=True)
@click.option("--lend-idle/--no-lend-idle", default=True, show_default=True)
@click.option("--over-quota-weight", type=float)
@click.option("--queue-strategy", type=click.Choice(["priority", "fifo"]), default="priority")
@click.option(
    "--allowed-node-pool", "allowed", multiple=True, help="Restrict to this node pool (repeat)."
)
@output_options
def quota_create(
    name: str,
    parent: str | None,
    resource_pool: str | None,
    gpu: str | None,
    max_gpu: str | None,
    node_pool: str | None,
    child_preemption: bool,
    lend_idle: bool,
    over_quota_weight: float | None,
    queue_strategy: str,
    allowed: tuple[str, ...],
) -> None:
    """Add a root quota (--resource-pool) or a child-level one (--parent)."""
    body: dict[str, Any] = {
        "name": name,
        "child_preemption": child_preemption,
        "lend_idle": lend_idle,
        "queue_strategy": queue_strategy,
    }
    if parent:
        body["parent"] = parent
    if resource_pool:
        body["resource_pool"] = resource_pool
    if over_quota_weight is not None:
        body["over_quota_weight"] = over_quota_weight
    if allowed:
        body["allowed_node_pools"] = list(allowed)
    if gpu is not None or max_gpu is not None:
        if not node_pool:
            raise CLIError("--gpu and --max-gpu need --node-pool.")
        row: dict[str, Any] = {"node_pool": node_pool}
        if gpu is not None:
            row["min"] = {"gpu": gpu}
        if max_gpu is not None:
            row["max"] = {"gpu": _number_or_none(max_gpu)}
        body["resources"] = [row]
    answer = Client.from_config().post("quotas/", body)
    emit(answer, [quota_row(answer)], QUOTA_HEADER)


@quota.command("scale")
@click.argument("name", shell_complete=QUOTAS)
@click.option("--gpu", required=True, help="Guaranteed GPUs (min).")
@click.option("--max-gpu", help="Limit in GPUs, or none.")
@click.option("--node-pool", help="Needed when the quota has several.")
@click.option(
    "--preview",
    is_flag=True,
    help="Only list the running workloads whose In Quota label would change.",
)
@output_options
def quota_scale(
    name: str, gpu: str, max_gpu: str | None, node_pool: str | None, preview: bool
) -> None:
    """Set a quota's guaranteed GPUs on one node pool (its only one by default)."""
    client = Client.from_config()
    found = _quota(client, name)
    row: dict[str, Any] = {"node_pool": _node_pool(found, node_pool), "min": {"gpu": gpu}}
    if max_gpu is not None:
        row["max"] = {"gpu": _number_or_none(max_gpu)}
    if preview:
        answer = client.post(f"quotas/{found['id']}/scale/preview/", {"resources": [row]})
        rows = [
            [change, w["name"], w["kind"], w["workspace"], w["quota"], w["priority"], w["gpu"]]
            for key, change in (("not_in_quota", "loses In Quota"), ("in_quota", "gains In Quota"))
            for w in answer[key]
        ]
        header = ["CHANGE", "WORKLOAD", "KIND", "WORKSPACE", "QUOTA", "PRIORITY", "GPUS"]
        emit(answer, rows, header)
        return
    answer = client.post(
        f"quotas/{found['id']}/scale/", {"resources": [row]}, headers=_if_match(found)
    )
    emit(answer, [quota_row(answer)], QUOTA_HEADER)


@quota.command("rebalance")
@click.option(
    "--from", "source", required=True, shell_complete=QUOTAS, help="The quota that gives."
)
@click.option(
    "--to", "target", required=True, shell_complete=QUOTAS, help="The sibling that takes."
)
@click.option("--gpu", default="0", show_default=True, help="GPUs to move.")
@click.option("--cpu", type=int, default=0, help="Millicores to move.")
@click.option("--memory", type=int, default=0, help="MiB to move.")
@click.option("--node-pool", help="Needed when the resource pool has several.")
@output_options
def quota_rebalance(
    source: str, target: str, gpu: str, cpu: int, memory: int, node_pool: str | None
) -> None:
    """Move guaranteed GPUs (or CPU, memory) from one quota to a sibling, atomically."""
    body: dict[str, Any] = {"from": source, "to": target, "gpu": gpu}
    if cpu:
        body["cpu"] = cpu
    if memory:
        body["memory"] = memory
    if node_pool:
        body["node_pool"] = node_pool
    answer = Client.from_config().post("quotas/rebalance/", body)
    emit(answer, [quota_row(answer["source"]), quota_row(answer["target"])], QUOTA_HEADER)


@quota.command("settings")
@click.argument("name", shell_complete=QUOTAS)
@click.option("--rename", "new_name", help="A new name.")
@click.option("--child-preemption/--no-child-preemption", default=None)
@click.option("--lend-idle/--no-lend-idle", default=None)
@click.option("--over-quota-weight", help="A weight, or none to inherit.")
@click.option("--queue-strategy", type=click.Choice(["priority", "fifo"]))
@click.option(
    "--allowed-node-pool",
    "allowed",
    multiple=True,
    help="Restrict to this node pool (repeat); `--allowed-node-pool ''` lifts the restriction.",
)
@output_options
def quota_settings(
    name: str,
    new_name: str | None,
    child_preemption: bool | None,
    lend_idle: bool | None,
    over_quota_weight: str | None,
    queue_strategy: str | None,
    allowed: tuple[str, ...],
) -> None:
    """Show a quota's settings, or change those given (guarded by its version: 412 if stale)."""
    client = Client.from_config()
    found = _quota(client, name)
    body: dict[str, Any] = {}
    if new_name:
        body["name"] = new_name
    if child_preemption is not None:
        body["child_preemption"] = child_preemption
    if lend_idle is not None:
        body["lend_idle"] = lend_idle
    if over_quota_weight is not None:
        body["over_quota_weight"] = _number_or_none(over_quota_weight)
    if queue_strategy:
        body["queue_strategy"] = queue_strategy
    if allowed:
        body["allowed_node_pools"] = [p for p in allowed if p]
    if body:
        found = client.patch(f"quotas/{found['id']}/", body, headers=_if_match(found))
    else:
        found = client.get(f"quotas/{found['id']}/")
    _show_quota(found)


@quota.command("audit")
@click.argument("name", shell_complete=QUOTAS)
@output_options
def quota_audit(name: str) -> None:
    """Who changed a quota, when, and what (newest first)."""
    client = Client.from_config()
    records = client.all(f"quotas/{_quota(client, name)['id']}/audit/")
    rows = [[r["at"], r["actor"] or "-", r["action"], "; ".join(r["changes"])] for r in records]
    emit(records, rows, ["AT", "ACTOR", "ACTION", "CHANGES"])


@quota.command("rm")
@click.argument("name", shell_complete=QUOTAS)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def quota_rm(name: str, yes: bool) -> None:
    """Delete a quota with no children and no bound workspaces."""
    client = Client.from_config()
    found = _quota(client, name)
    if not yes:
        click.confirm(f"Delete quota {name}?", abort=True)
    client.delete(f"quotas/{found['id']}/")
    click.echo(f"Deleted quota {name}.")
