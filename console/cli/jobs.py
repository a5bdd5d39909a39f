"""`tidepool job …`: training jobs."""

from __future__ import annotations

from typing import Any

import click

from console.cli.client import Client, complete_names
from console.cli.logs import logs_options, workload_logs
from console.cli.output import emit, output_options
from console.cli.workloads import (
    EVENT_HEADER,
    WORKLOAD_HEADER,
    event_row,
    find,
    show,
    submit_body,
    submit_options,
    workload_row,
    workspace_option,
)

STATUSES = ("Queued", "Running", "Requeued", "Succeeded", "Failed", "Stopped", "Cancelled")

JOBS = complete_names("jobs/")


@click.group()
def job() -> None:
    """Training jobs: submit, list, read, cancel, logs."""


@job.command("submit")
@click.argument("name")
@submit_options
@click.option(
    "--idle",
    type=click.Choice(["none", "acceptable", "idle_only"]),
    default="none",
    show_default=True,
    help="May it run on borrowed (idle) capacity?",
)
@click.option("--checkpoint-interval", type=int, help="Seconds between checkpoints.")
@click.option("--total-work", type=float, help="GPU-seconds (default: one hour on all its GPUs).")
@click.option("--max-restarts", type=int, help="Restarts before it fails (default 3).")
@click.option("--fault-tolerance/--no-fault-tolerance", default=None)
@click.option(
    "--failure-policy",
    type=click.Choice(["any", "ExitCodeAndErrorMsg"]),
    help="ExitCodeAndErrorMsg: retry only the listed exit codes and messages.",
)
@click.option("--retry-exit-code", "retry_exit_codes", type=int, multiple=True)
@click.option("--retry-message", "retry_messages", multiple=True, help="A regular expression.")
@click.option("--fail-exit-code", "fail_exit_codes", type=int, multiple=True)
@click.option("--fail-message", "fail_messages", multiple=True, help="A regular expression.")
@click.option("--command", "command_line", help="The command the container runs.")
@output_options
def job_submit(
    name: str,
    idle: str,
    checkpoint_interval: int | None,
    total_work: float | None,
    max_restarts: int | None,
    fault_tolerance: bool | None,
    failure_policy: str | None,
    command_line: str | None,
    retry_exit_codes: tuple[int, ...],
    retry_messages: tuple[str, ...],
    fail_exit_codes: tuple[int, ...],
    fail_messages: tuple[str, ...],
    **shape: Any,
) -> None:
    """Submit a training job NAME (repeat --retry-exit-code and the like for more)."""
    body = submit_body(name=name, **shape)
    body["idle_policy"] = idle
    optional = {
        "checkpoint_interval": checkpoint_interval,
        "total_work": total_work,
        "max_restarts": max_restarts,
        "fault_tolerance": fault_tolerance,
        "failure_policy": failure_policy,
        "command": command_line,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    lists = {
        "retry_exit_codes": retry_exit_codes,
        "retry_messages": retry_messages,
        "fail_exit_codes": fail_exit_codes,
        "fail_messages": fail_messages,
    }
    body.update({k: list(v) for k, v in lists.items() if v})
    answer = Client.from_config().post("jobs/", body)
    emit(answer, [workload_row(answer)], WORKLOAD_HEADER)


@job.command("ls")
@click.option("--workspace", help="Only this workspace's.")
@click.option("--status", type=click.Choice(STATUSES), help="Only jobs in this status.")
@click.option("--quota", help="Only this quota's (name or id).")
@click.option("--owner", help="Only this user's.")
@click.option("--name", help="Only jobs with this name.")
@click.option("--search", help="Only jobs whose name holds this text (any case).")
@click.option(
    "--in-quota/--not-in-quota", "in_quota", default=None, help="Only In Quota (or borrowed) jobs."
)
@click.option("--node-pool", "node_pool", help="Only jobs that may run in this node pool.")
@click.option("--submitted-after", "submitted_after", help="ISO time: submitted at or after it.")
@click.option("--submitted-before", "submitted_before", help="ISO time: submitted before it.")
@output_options
def job_ls(in_quota: bool | None, **filters: str | None) -> None:
    """The training jobs you may see, filtered as the API filters them."""
    if in_quota is not None:
        filters["in_quota"] = "true" if in_quota else "false"
    jobs = Client.from_config().all("jobs/", **filters)
    emit(jobs, [workload_row(j) for j in jobs], WORKLOAD_HEADER)


@job.command("show")
@click.argument("name", shell_complete=JOBS)
@workspace_option
@output_options
def job_show(name: str, workspace: str | None) -> None:
    """One job: its settings, pods and event timeline."""
    detail = find(Client.from_config(), "jobs/", "job", name, workspace)
    extra = [
        ("idle policy", detail["idle_policy"]),
        ("progress", f"{detail['progress']} / {detail['total_work']} GPU-s"),
        ("restarts", f"{detail['restarts']} of {detail['max_restarts']}"),
        ("failure policy", detail["failure_policy"]),
        ("last checkpoint", detail["checkpoint_label"] or "no checkpoint reported"),
    ]
    show(detail, extra)


@job.command("cancel")
@click.argument("name", shell_complete=JOBS)
@workspace_option
@output_options
def job_cancel(name: str, workspace: str | None) -> None:
    """Cancel a queued or running job."""
    client = Client.from_config()
    found = client.one("jobs/", "job", name, workspace=workspace)
    answer = client.post(f"jobs/{found['id']}/cancel/")
    emit(answer, [workload_row(answer)], WORKLOAD_HEADER)


@job.command("logs-events")
@click.argument("name", shell_complete=JOBS)
@workspace_option
@output_options
def job_events(name: str, workspace: str | None) -> None:
    """A job's event timeline (JSON: its events as the API gives them)."""
    detail = find(Client.from_config(), "jobs/", "job", name, workspace)
    emit(detail["events"], [event_row(e) for e in detail["events"]], EVENT_HEADER)


@job.command("logs")
@click.argument("name", shell_complete=JOBS)
@workspace_option
@logs_options
def job_logs(name: str, workspace: str | None, **options: Any) -> None:
    """A replica's container log (`job logs-events` prints the event timeline)."""
    workload_logs("jobs/", "job", name, workspace, **options)
