"""`tidepool job|service|instance logs` against the live test server."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from console.cli import logs as cli_logs
from jobs.models import Workload
from jobs.services.workloads import Shape, instance_start
from tests.cli.conftest import fails, login
from tests.jobs import conftest as control

service = control.service  # Alice's chat-api (tests/jobs/conftest.py)
STEP = re.compile(r"\[rank (\d)\] step (\d+) loss")


@pytest.fixture
def resnet(bob: Any, submit: Callable[..., Workload], tick: Callable[..., None]) -> Workload:
    """Bob's two-replica job, running for five minutes (ten steps each)."""
    job = submit(bob, "resnet", replicas=2)
    tick(0)
    tick(31)
    tick(300)
    return job


def test_job_logs_prints_the_last_lines_of_a_replica(cli: Any, resnet: Workload) -> None:
    login(cli, "bob")
    code, out, err = cli("job", "logs", "resnet", "--tail", "3")
    assert code == 0 and not err
    lines = out.splitlines()
    assert [STEP.search(line)[2] for line in lines] == ["8", "9", "10"]  # type: ignore[index]
    code, out, _ = cli("job", "logs", "resnet", "--replica", "1", "--tail", "1")
    assert code == 0 and "[rank 1] step 10 loss" in out
    err = fails(cli, "job", "logs", "resnet", "--replica", "5")
    assert "replica: resnet has no replica 5 (replicas: 0, 1). (HTTP 400)" in err
    assert "tail:" in fails(cli, "job", "logs", "resnet", "--tail", "0")


def test_job_logs_of_another_workspace_is_not_found(cli: Any, resnet: Workload) -> None:
    login(cli, "alice")
    assert "No job named 'resnet'" in fails(cli, "job", "logs", "resnet")


def test_a_queued_job_says_why_it_has_no_lines(
    cli: Any, bob: Any, submit: Callable[..., Workload]
) -> None:
    submit(bob, "later")
    login(cli, "bob")
    code, out, err = cli("job", "logs", "later")
    assert code == 0 and out == "" and err == "later has not been placed yet.\n"


def test_follow_prints_each_new_line_once_until_the_replica_ends(
    cli: Any,
    resnet: Workload,
    sim: Any,
    tick: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    login(cli, "bob")
    # Instead of waiting between two questions, the cluster moves on: two steps, then the
    # replica crashes.
    waits: list[float] = []

    def cluster_moves(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:
            tick(60)
        else:
            sim.inject_pod_crash(resnet.pods.get(index=0), exit_code=2)
            tick(5)

    monkeypatch.setattr(cli_logs, "pause", cluster_moves)
    code, out, err = cli("job", "logs", "resnet", "--follow")
    assert code == 0 and len(waits) == 2
    lines = out.splitlines()
    steps = [int(m[2]) for m in map(STEP.search, lines) if m]
    assert steps == list(range(1, 13))
    assert lines[-1].endswith("[rank 0] process exited; exit code 2")
    assert err == f"tp-{resnet.pk}-0-0 ended: Failed.\n"


def test_service_and_instance_logs(
    cli: Any, alice: Any, demo: Any, clock: Any, service: Workload, tick: Callable[..., None]
) -> None:
    instance_start(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="nb",
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        max_duration=7200,
        now=clock.now(),
    )
    tick(0)
    tick(31)
    tick(120)
    login(cli, "alice")
    code, out, _ = cli("service", "logs", "chat-api")
    assert code == 0 and "requests in the last minute" in out.splitlines()[-1]
    code, out, _ = cli("instance", "logs", "nb")
    assert code == 0 and "Jupyter Server" in out
