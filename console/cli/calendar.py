"""`tidepool calendar …`: the quota calendar (platform admins): scheduled rebalance, scale or
lend-idle."""

from __future__ import annotations

from typing import Any

import click

from console.cli.client import Client
from console.cli.output import emit, output_options

HEADER = [
    "NAME",
    "ACTION",
    "QUOTA",
    "TO",
    "GPUS",
    "LEND IDLE",
    "CRON",
    "TIMEZONE",
    "EXCLUDE",
    "ENABLED",
    "LAST OUTCOME",
]


def _row(r: dict[str, Any]) -> list[Any]:
    """A calendar rule as one table row."""
    lend = "-" if r["lend_idle"] is None else ("on" if r["lend_idle"] else "off")
    return [
        r["name"],
        r["action"],
        r["quota"],
        r["to"] or "-",
        "-" if r["gpus"] is None else r["gpus"],
        lend,
        r["cron"],
        r["timezone"],
        ",".join(r["exclude_dates"]) or "-",
        "yes" if r["enabled"] else "no",
        r["last_outcome"] or "-",
    ]


@click.group()
def calendar() -> None:
    """The quota calendar: at each cron time, move, scale or set lend-idle."""


@calendar.command("list")
@click.option("--quota", help="Only the rules that change this quota.")
@output_options
def calendar_list(quota: str | None) -> None:
    """Every calendar rule (or those of one quota)."""
    client = Client.from_config()
    found = client.all("quota-calendar/", **({"quota": quota} if quota else {}))
    emit(found, [_row(r) for r in found], HEADER)


@calendar.command("add")
@click.argument("name")
@click.option(
    "--action",
    type=click.Choice(["rebalance", "scale", "lend_idle"]),
    required=True,
    help="rebalance: move --gpus to --to; scale: guarantee --gpus; lend_idle: --on/--off.",
)
@click.option("--quota", required=True, help="The quota it changes (for a move, the giver).")
@click.option("--to", "to", help="rebalance: the sibling that takes the GPUs.")
@click.option("--gpus", type=int, help="Whole GPUs moved, or scaled to.")
@click.option("--node-pool", help="Needed when the resource pool has several.")
@click.option("--on/--off", "lend_idle", default=None, help="lend_idle: the value it sets.")
@click.option("--cron", required=True, help='When it fires, e.g. "0 22 * * 1-5".')
@click.option("--timezone", default="UTC", show_default=True)
@click.option("--exclude-date", "exclude", multiple=True, help="YYYY-MM-DD; repeat for more.")
@click.option("--disabled", is_flag=True, help="Add it switched off.")
@output_options
def calendar_add(
    name: str,
    action: str,
    quota: str,
    to: str | None,
    gpus: int | None,
    node_pool: str | None,
    lend_idle: bool | None,
    cron: str,
    timezone: str,
    exclude: tuple[str, ...],
    disabled: bool,
) -> None:
    """Add the calendar rule NAME."""
    body: dict[str, Any] = {
        "name": name,
        "action": action,
        "quota": quota,
        "to": to,
        "gpus": gpus,
        "node_pool": node_pool,
        "lend_idle": lend_idle,
        "cron": cron,
        "timezone": timezone,
        "exclude_dates": list(exclude),
        "enabled": not disabled,
    }
    answer = Client.from_config().post("quota-calendar/", body)
    emit(answer, [_row(answer)], HEADER)


@calendar.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def calendar_delete(name: str, yes: bool) -> None:
    """Delete the calendar rule NAME and its beat task."""
    client = Client.from_config()
    found = client.one("quota-calendar/", "calendar rule", name)
    if not yes:
        click.confirm(f"Delete calendar rule {name}?", abort=True)
    client.delete(f"quota-calendar/{found['id']}/")
    click.echo(f"Deleted calendar rule {name}.")
