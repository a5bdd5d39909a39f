"""`tidepool what-if`: replay a past window under proposed changes (platform admins)."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from console.cli.client import Client, CLIError
from console.cli.output import emit, output_format, output_options, table

POLL_SECONDS = 1.0


def _summary(run: dict[str, Any]) -> None:
    """The replay's status, then per quota its figures, baseline → proposal."""
    click.echo(f"What if #{run['id']}: {run['status']} ({round(100 * run['progress'])}%)")
    if run.get("error"):
        click.echo(run["error"])
    result = run.get("result")
    if not result:
        return
    fid = result["fidelity"]
    click.echo(
        f"Fidelity: baseline {fid['replayed_pct']}% allocated against {fid['recorded_pct']}% "
        f"recorded; worst quota {fid['max_diff_points']} points "
        f"(tolerance {fid['tolerance_points']})."
    )
    base, prop = result["cluster"]["baseline"], result["cluster"]["proposal"]
    click.echo(
        f"Allocation {base['allocation_pct']}% → {prop['allocation_pct']}%, "
        f"idle {base['idle_gpu_hours']} → {prop['idle_gpu_hours']} GPU-hours."
    )
    rows = []
    for quota, runs in result["quotas"].items():
        b, p = runs["baseline"], runs["proposal"]
        moved = result["finishing"].get(quota, {"later": 0, "earlier": 0})
        rows.append(
            [
                quota,
                f"{b['gpu_hours']} → {p['gpu_hours']}",
                f"{b['wait_p95_min']} → {p['wait_p95_min']}",
                f"{sum(b['preemptions'].values())} → {sum(p['preemptions'].values())}",
                f"{b['lost_gpu_hours']} → {p['lost_gpu_hours']}",
                f"{moved['later']} / {moved['earlier']}",
            ]
        )
    header = ["QUOTA", "GPU-HOURS", "P95 WAIT MIN", "PREEMPTIONS", "LOST GPU-H", "LATER / EARLIER"]
    click.echo(table(rows, header), nl=False)


@click.command("what-if")
@click.option(
    "--window", type=click.Choice(["24h", "7d", "custom"]), default="7d", show_default=True
)
@click.option("--start", help="Custom window start (ISO 8601, UTC).")
@click.option("--end", help="Custom window end (ISO 8601, UTC).")
@click.option("--scale", multiple=True, metavar="QUOTA=GPUS", help='e.g. "Quota 1.1=56".')
@click.option(
    "--rebalance", multiple=True, metavar="FROM>TO=GPUS", help='e.g. "Quota 1.2>Quota 1.1=8".'
)
@click.option("--child-preemption", multiple=True, metavar="QUOTA=on|off")
@click.option("--lend-idle", multiple=True, metavar="QUOTA=on|off")
@click.option("--weight", multiple=True, metavar="QUOTA=WEIGHT")
@click.option("--nodes", multiple=True, metavar="POOL=+N|-N", help="Add or remove nodes in a pool.")
@click.option("--changes", "changes_json", help="More changes as a JSON list (any kind).")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the result.")
@output_options
def what_if(
    window: str,
    start: str | None,
    end: str | None,
    scale: tuple[str, ...],
    rebalance: tuple[str, ...],
    child_preemption: tuple[str, ...],
    lend_idle: tuple[str, ...],
    weight: tuple[str, ...],
    nodes: tuple[str, ...],
    changes_json: str | None,
    wait: bool,
) -> None:
    """Replay a past window as configured and with the changes, and compare the two."""
    from whatif.changes import ChangeError, from_options

    try:
        changes = from_options(
            scale=scale,
            rebalance=rebalance,
            child_preemption=child_preemption,
            lend_idle=lend_idle,
            weight=weight,
            nodes=nodes,
        )
    except ChangeError as exc:
        raise click.BadParameter(exc.reason, param_hint=exc.field) from None
    if changes_json:
        try:
            extra = json.loads(changes_json)
        except ValueError:
            raise click.BadParameter("must be a JSON list", param_hint="--changes") from None
        changes += extra if isinstance(extra, list) else [extra]
    if not changes:
        raise CLIError("Name at least one change: --scale, --rebalance, … or --changes.")
    client = Client.from_config()
    body: dict[str, Any] = {"window": window, "changes": changes}
    if start:
        body["start"] = start
    if end:
        body["end"] = end
    run = client.post("what-if/", body)
    while wait and run["status"] in ("queued", "running"):
        time.sleep(POLL_SECONDS)
        run = client.get(f"what-if/{run['id']}/")
    if output_format() != "table":
        emit(run, [], [])
    else:
        _summary(run)
    if run["status"] == "failed":
        raise CLIError(run["error"] or "The replay failed.")
