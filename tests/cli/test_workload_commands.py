"""`tidepool job|service|instance …` against a live server: every command, JSON checked."""

from __future__ import annotations

from typing import Any

from tests.cli.conftest import as_json, as_yaml, fails, login

SUBMIT = ("--workspace", "workspace_b", "--gpus", "8")


def test_job_submit_ls_filters_show_cancel(cli: Any) -> None:
    login(cli, "bob")
    first = as_json(cli, "job", "submit", *SUBMIT, "--replicas", "2", "--idle", "acceptable", "a")
    assert first["name"] == "a" and first["status"] == "Queued" and first["gpu"] == 8
    assert first["idle_policy"] == "acceptable" and first["quota"] == "Quota 1.1"
    second = as_json(
        cli, "job", "submit", *SUBMIT, "--priority", "7", "--max-restarts", "1", "--image", "x", "b"
    )
    assert second["priority"] == 7 and second["max_restarts"] == 1 and second["image"] == "x"

    assert {j["name"] for j in as_json(cli, "job", "ls")} == {"a", "b"}
    assert [j["name"] for j in as_json(cli, "job", "ls", "--name", "b")] == ["b"]
    assert [j["name"] for j in as_json(cli, "job", "ls", "--owner", "alice")] == []
    queued = as_json(cli, "job", "ls", "--status", "Queued", "--workspace", "workspace_b")
    assert len(queued) == 2
    assert len(as_json(cli, "job", "ls", "--quota", "Quota 1.1")) == 2
    assert as_yaml(cli, "job", "ls", "--name", "a")[0]["id"] == first["id"]
    assert {j["name"] for j in as_json(cli, "job", "ls", "--search", "A")} == {"a"}
    assert as_json(cli, "job", "ls", "--in-quota") == []  # nothing runs yet
    assert len(as_json(cli, "job", "ls", "--not-in-quota")) == 0
    assert len(as_json(cli, "job", "ls", "--node-pool", "A100-80G")) == 2
    assert len(as_json(cli, "job", "ls", "--submitted-after", "2000-01-01T00:00:00Z")) == 2
    assert as_json(cli, "job", "ls", "--submitted-before", "2000-01-01T00:00:00Z") == []
    fails(cli, "job", "ls", "--submitted-after", "soon")

    shown = as_json(cli, "job", "show", "a")
    assert shown["id"] == first["id"] and shown["events"][0]["kind"] == "submitted"
    code, out, _ = cli("job", "show", "a")
    assert code == 0 and "idle policy" in out and "Submitted by bob" in out

    cancelled = as_json(cli, "job", "cancel", "a")
    assert cancelled["status"] == "Cancelled"
    assert [j["name"] for j in as_json(cli, "job", "ls", "--status", "Cancelled")] == ["a"]
    events = as_json(cli, "job", "logs-events", "a")
    assert [e["kind"] for e in events][0] == "submitted" and len(events) >= 2

    code, out, err = cli("job", "logs", "b")  # queued: no replica yet
    assert code == 0 and not out and err == "b has not been placed yet.\n"
    assert "No job named 'zzz'" in fails(cli, "job", "cancel", "zzz")
    err = fails(cli, "job", "submit", "--workspace", "workspace_a", "--gpus", "8", "c")
    assert "workspace:" in err and "(HTTP 400)" in err


def test_service_create_ls_show_scale_rules_and_stop(cli: Any) -> None:
    login(cli, "alice")
    made = as_json(
        cli,
        "service",
        "create",
        "--workspace",
        "workspace_a",
        "--gpus",
        "8",
        "--max-replicas",
        "4",
        "chat-api",
    )
    assert made["name"] == "chat-api" and made["min_replicas"] == 1 and made["max_replicas"] == 4
    assert [s["name"] for s in as_json(cli, "service", "ls")] == ["chat-api"]
    assert as_json(cli, "service", "ls", "--workspace", "workspace_b") == []
    assert as_json(cli, "service", "show", "chat-api")["id"] == made["id"]
    assert as_json(cli, "service", "scale", "chat-api", "3")["replicas"] == 3
    assert "1-4 replicas; 5 is out of that range" in fails(cli, "service", "scale", "chat-api", "5")

    rule = as_json(
        cli,
        "service",
        "rules",
        "add",
        "chat-api",
        "night",
        "--cron",
        "0 20 * * *",
        "--target",
        "1",
        "--timezone",
        "Europe/Paris",
    )
    assert rule["name"] == "night" and rule["target_replicas"] == 1 and rule["enabled"] is True
    assert rule["timezone"] == "Europe/Paris"
    listed = as_json(cli, "service", "rules", "ls", "chat-api")
    assert [r["name"] for r in listed] == ["night"]
    err = fails(cli, "service", "rules", "add", "chat-api", "bad", "--cron", "x", "--target", "1")
    assert "cron" in err and "(HTTP 400)" in err
    code, out, _ = cli("service", "rules", "rm", "chat-api", "night")
    assert code == 0 and "Deleted rule night" in out
    assert as_json(cli, "service", "rules", "ls", "chat-api") == []
    assert "no rule named 'night'" in fails(cli, "service", "rules", "rm", "chat-api", "night")

    assert as_json(cli, "service", "stop", "chat-api")["status"] == "Cancelled"


def test_instance_start_ls_show_open_and_stop(cli: Any) -> None:
    login(cli, "bob")
    started = as_json(
        cli,
        "instance",
        "start",
        *SUBMIT,
        "--max-duration",
        "3600",
        "--idle-stop-minutes",
        "30",
        "nb",
    )
    assert started["name"] == "nb" and started["max_duration"] == 3600
    assert started["idle_stop_minutes"] == 30
    assert [i["name"] for i in as_json(cli, "instance", "ls")] == ["nb"]
    assert as_json(cli, "instance", "ls", "--owner", "alice") == []
    assert as_json(cli, "instance", "show", "nb")["events"][0]["kind"] == "submitted"
    code, out, _ = cli("instance", "open", "nb", "--print")
    page = f"{cli.url}/workspaces/workspace_b/instances/{started['id']}/"
    assert code == 0 and out.strip() == page
    assert as_json(cli, "instance", "stop", "nb")["status"] == "Stopped"
    # No job or service is an instance.
    assert as_json(cli, "job", "ls") == [] and as_json(cli, "service", "ls") == []
