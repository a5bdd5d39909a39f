"""`tidepool quota …` against a live server: every command, its JSON parsed and checked."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from tests.cli.conftest import as_json, as_yaml, fails, login
from tests.scheduling.test_cli import REPO


def test_quota_show_create_settings_audit_and_rm_as_admin(cli: Any) -> None:
    login(cli, "admin")
    shown = as_json(cli, "quota", "show", "Quota 1.1")
    assert shown["name"] == "Quota 1.1" and shown["parent"] == "Quota 1"
    assert shown["resources"] == [
        {
            "node_pool": "A100-80G",
            "min": {"gpu": 48, "cpu": 0, "memory": 0},
            "max": {"gpu": None, "cpu": None, "memory": None},
        }
    ]
    assert as_yaml(cli, "quota", "show", "Quota 1.1") == shown
    code, out, _ = cli("quota", "show", "Quota 1.1")
    assert code == 0 and "A100-80G" in out and "child preemption" in out

    created = as_json(
        cli,
        "quota",
        "create",
        "Quota 1.2.1",
        "--parent",
        "Quota 1.2",
        "--gpu",
        "8",
        "--max-gpu",
        "16",
        "--node-pool",
        "A100-80G",
        "--queue-strategy",
        "fifo",
    )
    assert created["parent"] == "Quota 1.2" and created["queue_strategy"] == "fifo"
    assert created["resources"][0]["min"]["gpu"] == 8
    assert created["resources"][0]["max"]["gpu"] == 16
    tree = as_json(cli, "quota", "ls")
    quota_12 = next(c for c in tree[0]["children"] if c["name"] == "Quota 1.2")
    assert [c["name"] for c in quota_12["children"]] == ["Quota 1.2.1"]

    changed = as_json(
        cli, "quota", "settings", "Quota 1.2.1", "--no-lend-idle", "--over-quota-weight", "2"
    )
    assert changed["lend_idle"] is False and changed["over_quota_weight"] == 2
    assert changed["version"] == created["version"] + 1
    assert as_json(cli, "quota", "settings", "Quota 1.2.1") == changed  # no flag: only shows

    scaled = as_json(cli, "quota", "scale", "Quota 1.2.1", "--gpu", "4", "--max-gpu", "none")
    assert scaled["resources"][0]["min"]["gpu"] == 4
    assert scaled["resources"][0]["max"]["gpu"] is None
    preview = as_json(cli, "quota", "scale", "Quota 1.2.1", "--gpu", "0", "--preview")
    assert preview == {"not_in_quota": [], "in_quota": []}

    audit = as_json(cli, "quota", "audit", "Quota 1.2.1")
    assert [r["action"] for r in audit][-1] == "create"
    assert len(audit) == 3 and all(r["actor"] == "admin" for r in audit)
    code, out, _ = cli("quota", "audit", "Quota 1.2.1")
    assert code == 0 and out.splitlines()[0].split() == ["AT", "ACTOR", "ACTION", "CHANGES"]

    code, out, _ = cli("quota", "rm", "Quota 1.2.1", "--yes")
    assert code == 0 and "Deleted quota Quota 1.2.1" in out
    assert "No quota named 'Quota 1.2.1'" in fails(cli, "quota", "show", "Quota 1.2.1")


def test_quota_errors_carry_the_servers_message(cli: Any) -> None:
    login(cli, "admin")
    err = fails(cli, "quota", "create", "Orphan", "--gpu", "8", "--node-pool", "A100-80G")
    assert "resource_pool: A root quota needs a resource pool." in err and "(HTTP 400)" in err
    err = fails(cli, "quota", "rebalance", "--from", "Quota 1.2", "--to", "Nope", "--gpu", "8")
    assert "to:" in err and "(HTTP 400)" in err
    moved = as_json(
        cli, "quota", "rebalance", "--from", "Quota 1.2", "--to", "Quota 1.1", "--gpu", "8"
    )
    assert moved["source"]["resources"][0]["min"]["gpu"] == 72
    assert moved["target"]["resources"][0]["min"]["gpu"] == 56


def test_members_see_no_quota(cli: Any) -> None:
    login(cli, "bob")
    assert as_json(cli, "quota", "ls") == []
    assert "No quota named 'Quota 1.1'" in fails(cli, "quota", "show", "Quota 1.1")
    assert "No quota named 'Quota 1.1'" in fails(cli, "quota", "audit", "Quota 1.1")


def test_completion_offers_the_servers_names(cli: Any, tmp_path: Any) -> None:
    login(cli, "admin")

    def complete(words: str, cword: int) -> list[str]:
        env = {
            **os.environ,
            "TIDEPOOL_CONFIG": str(tmp_path / "config.json"),
            "_TIDEPOOL_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(cword),
        }
        done = subprocess.run(
            [sys.executable, "-m", "console.cli"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return [line.split(",", 1)[1] for line in done.stdout.splitlines()]

    assert complete("tidepool quota show Quota\\ 1.", 3) == ["Quota 1.1", "Quota 1.2"]
    assert complete("tidepool quota rebalance --from Q", 4) == [
        "Quota 1",
        "Quota 1.1",
        "Quota 1.2",
    ]
    assert complete("tidepool workspace members ls workspace_", 4) == [
        "workspace_a",
        "workspace_b",
        "workspace_c",
    ]
