"""`tidepool workspace …` against a live server: every command, its JSON parsed and checked."""

from __future__ import annotations

from typing import Any

from tests.cli.conftest import as_json, fails, login


def test_workspace_ls_show_and_members_as_a_member(cli: Any) -> None:
    login(cli, "bob")
    listed = as_json(cli, "workspace", "ls")
    assert [w["name"] for w in listed] == ["workspace_b"]
    shown = as_json(cli, "workspace", "show", "workspace_b")
    assert shown["quotas"] == ["Quota 1.1"]
    assert shown["members"] == [{"user": "bob", "role": "developer"}]
    code, out, _ = cli("workspace", "show", "workspace_b")
    assert code == 0 and "Quota 1.1" in out and "developer" in out
    members = as_json(cli, "workspace", "members", "ls", "workspace_b")
    assert members == [{"user": "bob", "role": "developer"}]
    # A developer may not manage; another team's workspace does not exist for bob.
    err = fails(cli, "workspace", "members", "add", "workspace_b", "carol")
    assert "(HTTP 403)" in err
    assert "No workspace named 'workspace_a'" in fails(cli, "workspace", "show", "workspace_a")


def test_admin_adds_and_removes_members_and_binds_quotas(cli: Any) -> None:
    login(cli, "admin")
    assert [w["name"] for w in as_json(cli, "workspace", "ls")] == [
        "workspace_a",
        "workspace_b",
        "workspace_c",
    ]
    added = as_json(cli, "workspace", "members", "add", "workspace_b", "carol", "--role", "viewer")
    assert added == {"user": "carol", "role": "viewer"}
    members = as_json(cli, "workspace", "members", "ls", "workspace_b")
    assert {m["user"]: m["role"] for m in members} == {"bob": "developer", "carol": "viewer"}
    code, out, _ = cli("workspace", "members", "rm", "workspace_b", "carol")
    assert code == 0 and "Removed carol" in out
    assert [m["user"] for m in as_json(cli, "workspace", "members", "ls", "workspace_b")] == ["bob"]

    bound = as_json(cli, "workspace", "bind", "workspace_b", "Quota 1.2")
    assert bound["quota"] == "Quota 1.2"
    assert as_json(cli, "workspace", "show", "workspace_b")["quotas"] == [
        "Quota 1.1",
        "Quota 1.2",
    ]
    code, out, _ = cli("workspace", "unbind", "workspace_b", "Quota 1.2")
    assert code == 0 and "Unbound Quota 1.2" in out
    assert as_json(cli, "workspace", "show", "workspace_b")["quotas"] == ["Quota 1.1"]
    err = fails(cli, "workspace", "unbind", "workspace_b", "Quota 1.2")
    assert "has no quota named 'Quota 1.2'" in err
