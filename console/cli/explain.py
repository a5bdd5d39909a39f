"""`tidepool explain SCENARIO`: the scheduling core's "what would happen if", run locally.

No server is asked: the API has no endpoint for it, and the core is pure Python
(`python -m jobs.scheduling explain` prints the same JSON).
"""

from __future__ import annotations

import json
from typing import Any

import click
import yaml

from console.cli.client import CLIError
from console.cli.output import emit, output_format, output_options, table


def _rows(result: dict[str, Any]) -> list[list[Any]]:
    """One line per decision, admissions first."""
    rows: list[list[Any]] = []
    for a in result["admitted"]:
        label = "in quota" if a["in_quota"] else "not in quota"
        rows.append(["admit", a["workload"], f"{label} on {', '.join(a['nodes'])}"])
    for p in result["preempted"]:
        rows.append(["preempt", p["workload"], f"{p['reason']} by {p['by']} ({p['quota']})"])
    for d in result["demoted"]:
        rows.append(["demote", d["workload"], f"{d['reason']} by {d['by']} ({d['quota']})"])
    for w in result["pending"]:
        rows.append(["pending", w["workload"], w["reason"]])
    return rows


@click.command()
@click.argument("scenario", type=click.File("r", encoding="utf-8"))
@output_options
def explain(scenario: Any) -> None:
    """Run one scheduling cycle on SCENARIO (JSON or YAML; - for stdin) and print its
    decisions: admissions, preemptions, demotions and why each waiting workload waits.

    It runs here, on the scheduling core; no server is asked.
    """
    from jobs.scheduling._loader import load

    load()  # the compiled core, if fresh, before any core module is imported
    from jobs.scheduling.cycle import run_cycle
    from jobs.scheduling.scenario import load_scenario, render_result
    from jobs.scheduling.types import ScenarioError

    text = scenario.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise CLIError(f"{scenario.name} is neither JSON nor YAML: {err}") from None
    if not isinstance(data, dict):
        raise CLIError(f"{scenario.name} holds no scenario object.")
    try:
        result = render_result(run_cycle(load_scenario(data)))
    except ScenarioError as err:
        raise CLIError(str(err)) from None
    emit(result, _rows(result), ["DECISION", "WORKLOAD", "DETAIL"])
    if output_format() == "table" and result["classification"]:
        labels = [[k, v.replace("_", " ")] for k, v in result["classification"].items()]
        click.echo("\n" + table(labels, ["WORKLOAD", "LABEL AFTER THE CYCLE"]), nl=False)
