"""`tidepool`: a command line over the REST API (click over httpx).

    tidepool login URL [--username U --password P]
    tidepool quota ls | show | create | scale | rebalance | settings | audit | rm
    tidepool workspace ls | show | members ls/add/rm | bind | unbind
    tidepool job submit | ls | show | cancel | logs-events | logs
    tidepool service ls | show | create | scale | stop | logs | rules ls/add/rm
    tidepool instance start | ls | show | stop | open | logs
    tidepool calendar list | add | delete
    tidepool explain SCENARIO
    tidepool what-if --window 7d --scale "Quota 1.1=56" --rebalance "Quota 1.2>Quota 1.1=8"
    tidepool completion bash|zsh

Tables for people; ``--json`` or ``-o json|yaml`` print the API's body for scripts. An error
prints the API's message and exits 1 (2 for a usage error). The token lives in
~/.config/tidepool/config.json (or the file TIDEPOOL_CONFIG names).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
from click.shell_completion import get_completion_class

from console.cli.calendar import calendar
from console.cli.client import Client, CLIError, save_config
from console.cli.explain import explain
from console.cli.instances import instance
from console.cli.jobs import job
from console.cli.quotas import quota
from console.cli.services import service
from console.cli.whatif import what_if
from console.cli.workspaces import workspace

__all__ = ["CLIError", "cli", "main"]

COMPLETE_VAR = "_TIDEPOOL_COMPLETE"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tidepool", message="%(prog)s %(version)s")
def cli() -> None:
    """Tidepool from the command line: quotas, workspaces, jobs, services, instances."""


@cli.command()
@click.argument("url")
@click.option("--username", prompt=True, help="Asked for when omitted.")
@click.option("--password", prompt=True, hide_input=True, help="Asked for when omitted.")
def login(url: str, username: str, password: str) -> None:
    """Exchange a username and password for a token and save it with URL."""
    answer = Client(url).post("auth/token/", {"username": username, "password": password})
    save_config({"url": url, "token": answer["token"], "username": username})
    click.echo(f"Logged in to {url} as {username}.")


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    bash: eval "$(tidepool completion bash)"   (e.g. in ~/.bashrc)
    zsh:  eval "$(tidepool completion zsh)"    (e.g. in ~/.zshrc)
    """
    complete = get_completion_class(shell)
    assert complete is not None  # bash and zsh are click's own
    click.echo(complete(cli, {}, "tidepool", COMPLETE_VAR).source())


for group in (quota, workspace, job, service, instance, explain, calendar, what_if):
    cli.add_command(group)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; 0 on success, 1 with the API's message on stderr otherwise."""
    try:
        cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="tidepool",
            complete_var=COMPLETE_VAR,
            standalone_mode=False,
        )
    except CLIError as err:
        click.echo(f"error: {err}", err=True)
        return 1
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except click.Abort:
        click.echo("Aborted.", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
