"""How a command prints: a table for people, JSON or YAML (the API's own body) for scripts."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
import yaml

FORMATS = ("table", "json", "yaml")
F = TypeVar("F", bound=Callable[..., Any])


def _set_format(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """--json and -o both land in ctx.meta["output"]; the last one given wins."""
    if param.name == "as_json":
        if value:
            ctx.meta["output"] = "json"
    elif value is not None:
        ctx.meta["output"] = value
    return value


def output_options(command: F) -> F:
    """Add ``--json`` and ``-o/--output table|json|yaml`` to a command."""
    command = click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=_set_format,
        help="Print the API's JSON instead of a table (same as -o json).",
    )(command)
    return click.option(
        "-o",
        "--output",
        type=click.Choice(FORMATS),
        expose_value=False,
        callback=_set_format,
        help="Output format (default: table).",
    )(command)


def output_format() -> str:
    """The format this command was asked for."""
    ctx = click.get_current_context()
    return str(ctx.meta.get("output", "table"))


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """Left-aligned columns, two spaces apart."""
    cells = [list(header)] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in cells
    )


def emit(data: Any, rows: Sequence[Sequence[Any]], header: Sequence[str]) -> None:
    """Print `data` as JSON or YAML, or `rows` under `header` as a table."""
    fmt = output_format()
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), nl=False)
    else:
        click.echo(table(rows, header), nl=False)


def fields(data: Any, pairs: Sequence[tuple[str, Any]]) -> None:
    """Print `data` as JSON or YAML, or `pairs` as ``KEY  value`` lines."""
    emit(data, [[k, v] for k, v in pairs], ["FIELD", "VALUE"])


def gpus(value: Any) -> str:
    """A GPU amount; None is no limit."""
    return "∞" if value is None else str(value)


def yes_no(value: Any) -> str:
    """A tri-state flag as a table shows it."""
    return {True: "yes", False: "no"}.get(value, "-")
