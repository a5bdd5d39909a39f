"""`tidepool job|service|instance logs NAME`: a replica's log lines, followed if asked."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from console.cli.client import Client

F = TypeVar("F", bound=Callable[..., Any])

FOLLOW_SECONDS = 2.0  # between two questions while following
FOLLOW_TAIL = 5000  # the most lines one answer may hold (the API's limit)


def logs_options(command: F) -> F:
    """``--replica``, ``--attempt``, ``--tail`` and ``--follow``."""
    options = [
        click.option("--replica", type=int, help="Replica index (default: the first current one)."),
        click.option("--attempt", type=int, help="Attempt of that replica (default: the latest)."),
        click.option("--tail", type=int, default=200, show_default=True, help="Lines (1-5000)."),
        click.option(
            "--follow", "-f", is_flag=True, help="Keep printing new lines until the replica ends."
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def pause(seconds: float) -> None:
    """Wait between two questions while following (tests move their clock here instead)."""
    time.sleep(seconds)


def workload_logs(path: str, what: str, name: str, workspace: str | None, **options: Any) -> None:
    """Print the log of the workload `name` listed at `path` ("jobs/", …): print_logs."""
    client = Client.from_config()
    found = client.one(path, what, name, workspace=workspace)
    print_logs(client, f"{path}{found['id']}/logs/", **options)


def print_logs(
    client: Client,
    path: str,
    *,
    replica: int | None,
    attempt: int | None,
    tail: int,
    follow: bool,
) -> None:
    """Print the lines of `path` (…/{id}/logs/); following, ask for newer ones until it ends.

    Why there are no lines (not started yet, gone) goes to stderr, once.
    """
    answer = client.get(path, replica=replica, attempt=attempt, tail=tail)
    told = _print(answer, "")
    # Following stays on the replica and attempt the first answer showed.
    while follow and answer["live"]:
        pause(FOLLOW_SECONDS)
        answer = client.get(
            path,
            replica=answer["replica"],
            attempt=answer["attempt"],
            tail=FOLLOW_TAIL,
            since=answer["since"],
        )
        told = _print(answer, told)
    if follow and answer["pod"]:
        click.echo(f"{answer['pod']} ended: {answer['status']}.", err=True)


def _print(answer: dict[str, Any], told: str) -> str:
    """Print an answer's lines, and its notice unless it was the last one told; returns it."""
    for line in answer["lines"]:
        click.echo(line)
    if answer["notice"] and answer["notice"] != told:
        click.echo(answer["notice"], err=True)
    return str(answer["notice"])
