"""The `tidepool` command line against a live server."""

from __future__ import annotations

import json
from typing import Any

from jobs.services.workloads import Shape, service_create
from tests.cli.conftest import login as _login
from tests.jobs.borrowing import borrow, named


def test_login_stores_the_token_in_the_config_file(cli: Any, tmp_path: Any) -> None:
    _login(cli, "admin")
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["url"] == cli.url and len(saved["token"]) == 40
    code, _, err = cli("login", cli.url, "--username", "admin", "--password", "wrong")
    assert code == 1 and "Unable to log in with provided credentials" in err


def test_quota_ls_scale_and_rebalance(cli: Any) -> None:
    _login(cli, "admin")
    code, out, _ = cli("quota", "ls")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["NAME", "PARENT"]
    assert lines[1].startswith("Quota 1 ") and lines[2].startswith("  Quota 1.1")

    code, _, err = cli("quota", "scale", "Quota 1.1", "--gpu", "56")
    assert code == 1
    assert "At most 48 GPUs fit for Quota 1.1" in err and "(HTTP 400)" in err

    code, out, _ = cli(
        "quota", "rebalance", "--from", "Quota 1.2", "--to", "Quota 1.1", "--gpu", "8"
    )
    assert code == 0 and "Quota 1.1" in out
    code, out, _ = cli("quota", "scale", "Quota 1.1", "--gpu", "50", "--json")
    assert code == 0 and json.loads(out)["resources"][0]["min"]["gpu"] == 50
    code, out, _ = cli("quota", "ls", "--json")
    tree = json.loads(out)
    kids = {c["name"]: c["resources"][0]["min"]["gpu"] for c in tree[0]["children"]}
    assert kids == {"Quota 1.1": 50, "Quota 1.2": 72}


def test_job_submit_ls_and_events(cli: Any) -> None:
    _login(cli, "bob")
    code, out, _ = cli(
        "job",
        "submit",
        "--workspace",
        "workspace_b",
        "--gpus",
        "8",
        "--replicas",
        "2",
        "--idle",
        "acceptable",
        "--priority",
        "5",
        "resnet",
    )
    assert code == 0 and "resnet" in out and "Queued" in out
    code, out, _ = cli("job", "ls", "--json")
    assert [j["name"] for j in json.loads(out)] == ["resnet"]
    code, out, _ = cli("job", "logs-events", "resnet")
    assert code == 0 and "Submitted by bob to Quota 1.1" in out
    code, _, err = cli("job", "submit", "--workspace", "workspace_b", "--gpus", "1.5", "bad")
    assert code == 1 and "gpu: 1.5 GPUs per replica" in err
    code, _, err = cli("job", "logs-events", "nope")
    assert code == 1 and "No job named 'nope'" in err


def test_service_scale(cli: Any, demo: Any, alice: Any) -> None:
    service_create(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="chat-api",
        shape=Shape(replicas=1, gpu=8000),
        node_pools=[demo.node_pool],
        min_replicas=1,
        max_replicas=8,
    )
    _login(cli, "alice")
    code, out, _ = cli("service", "scale", "chat-api", "4")
    assert code == 0 and "chat-api" in out and " 4 " in out
    code, _, err = cli("service", "scale", "chat-api", "9")
    assert code == 1 and "1-8 replicas; 9 is out of that range" in err
    _login(cli, "bob")
    code, _, err = cli("service", "scale", "chat-api", "2")
    assert code == 1 and "No service named 'chat-api'" in err


def test_members_read_no_node_of_a_borrowed_job_and_admins_read_them(
    cli: Any, bob: Any, submit: Any, tick: Any
) -> None:
    job = borrow(submit, tick, bob)
    nodes = {p.node.name for p in job.pods.all()}
    commands = [
        ("job", "ls"),
        ("job", "ls", "--json"),
        ("job", "logs-events", "borrower"),
        ("job", "logs-events", "borrower", "--json"),
    ]
    _login(cli, "bob")
    for command in commands:
        code, out, _ = cli(*command)
        assert code == 0 and out, command
        assert named(out) == [], command
    _, out, _ = cli("job", "logs-events", "borrower")
    assert "7 replicas placed on idle capacity." in out

    _login(cli, "admin")
    _, out, _ = cli("job", "logs-events", "borrower")
    assert set(named(out)) == nodes  # after the borrowed entry, from its data
    _, out, _ = cli("job", "logs-events", "borrower", "--json")
    assert set(named(out)) == nodes
