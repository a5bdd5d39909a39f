"""The mission's walkthrough end to end through the API alone, the control loop driven by tick."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

NODES = "name,pool,gpus,cpu,memory\n" + "".join(
    f"h100-{i:02d},H100,8,128000,1048576\n" for i in range(1, 17)
)


def _user(username: str, *, admin: bool = False) -> None:
    user = get_user_model().objects.create_user(username, password=f"pw-{username}")
    if admin:
        user.user_permissions.add(Permission.objects.get(codename="manage_cluster"))


def _client(username: str) -> APIClient:
    """Log in through the token endpoint, as a script would."""
    client = APIClient()
    response = client.post(
        "/api/v1/auth/token/", {"username": username, "password": f"pw-{username}"}
    )
    assert response.status_code == 200, response.content
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    return client


def _ok(response: Any, code: int = 200) -> Any:
    assert response.status_code == code, response.content[:600]
    return response.json()


def _quota(admin: APIClient, name: str, gpus: int, parent: str | None, **extra: Any) -> int:
    body = {
        "name": name,
        "resource_pool": "lab",
        "parent": parent,
        "resources": [{"node_pool": "H100", "min": {"gpu": gpus}}],
        **extra,
    }
    return int(_ok(admin.post("/api/v1/quotas/", body, format="json"), 201)["id"])


def _job(client: APIClient, pk: int) -> dict[str, Any]:
    return dict(_ok(client.get(f"/api/v1/jobs/{pk}/")))


def test_mission_walkthrough_through_the_api(tick: Any, clock: Any) -> None:
    for name in ("alice", "bob", "carol"):
        _user(name)
    _user("admin", admin=True)
    admin, alice, bob = _client("admin"), _client("alice"), _client("bob")

    # A fresh resource pool with 16 × 8 H100 imported from CSV.
    _ok(admin.post("/api/v1/resource-pools/", {"name": "lab"}, format="json"), 201)
    imported = _ok(
        admin.post("/api/v1/nodes/import/", {"resource_pool": "lab", "text": NODES}), 201
    )
    assert imported == {"nodes": 16, "gpus": 128, "pools_created": ["H100"], "pools": {"H100": 16}}

    # Quota 1 with 128 GPUs and child preemption; children 48 and 80.
    q1 = _quota(admin, "Quota 1", 128, None, child_preemption=True)
    q11 = _quota(admin, "Quota 1.1", 48, "Quota 1")
    q12 = _quota(admin, "Quota 1.2", 80, "Quota 1")
    refused = admin.post(
        f"/api/v1/quotas/{q12}/scale/",
        {"resources": [{"node_pool": "H100", "min": {"gpu": 88}}]},
        format="json",
    )
    assert refused.status_code == 400
    message = (
        "Quota 1 has 128 GPUs on H100 and its children would need 136 GPUs "
        "(Quota 1.1 48 GPUs + Quota 1.2 88 GPUs). At most 80 GPUs fit for Quota 1.2."
    )
    assert refused.json() == {"resources": {"0": {"min": {"gpu": [message]}}}}
    tree = _ok(admin.get("/api/v1/quotas/?view=tree"))["results"]
    assert [(t["name"], [c["name"] for c in t["children"]]) for t in tree] == [
        ("Quota 1", ["Quota 1.1", "Quota 1.2"])
    ]

    # Three workspaces, bound, with members and Resource Usage rules.
    for team, ws, quota in (
        ("alice", "workspace_a", "Quota 1"),
        ("bob", "workspace_b", "Quota 1.1"),
        ("carol", "workspace_c", "Quota 1.2"),
    ):
        wid = _ok(admin.post("/api/v1/workspaces/", {"name": ws}, format="json"), 201)["id"]
        base = f"/api/v1/workspaces/{wid}"
        _ok(admin.post(f"{base}/quotas/", {"quota": quota}, format="json"), 201)
        member = {"user": team, "role": "developer"}
        _ok(admin.post(f"{base}/members/", member, format="json"), 201)
        rule = {"quota": quota, "role": "developer"}
        _ok(admin.post(f"{base}/resource-usage/", rule, format="json"), 201)
    assert [w["name"] for w in _ok(bob.get("/api/v1/workspaces/"))["results"]] == ["workspace_b"]

    # Alice's inference service in Quota 1 (one replica by night) and a day rule.
    svc = _ok(
        alice.post(
            "/api/v1/services/",
            {
                "workspace": "workspace_a",
                "name": "chat-api",
                "gpu": 8,
                "replicas": 1,
                "min_replicas": 1,
                "max_replicas": 8,
            },
            format="json",
        ),
        201,
    )["id"]
    day = {"name": "day", "cron": "0 8 * * *", "timezone": "UTC", "target_replicas": 8}
    _ok(alice.post(f"/api/v1/services/{svc}/rules/", day, format="json"), 201)

    # Bob: 48 GPUs In Quota, then 40 more with Acceptable idle resources (borrowed).
    submit = {"workspace": "workspace_b", "gpu": 8, "priority": 5}
    own = _ok(bob.post("/api/v1/jobs/", {**submit, "name": "own", "replicas": 6}), 201)["id"]
    tick(1)
    borrowed = _ok(
        bob.post(
            "/api/v1/jobs/",
            {**submit, "name": "borrowed", "replicas": 5, "idle_policy": "acceptable"},
        ),
        201,
    )["id"]
    tick(1)
    tick(30)
    assert _job(bob, own)["in_quota"] is True
    job = _job(bob, borrowed)
    assert job["status"] == "Running" and job["in_quota"] is False
    assert all(p["status"] == "Running" for p in job["pods"])
    usage = _ok(admin.get(f"/api/v1/quotas/{q11}/"))["usage"]
    assert usage == {"in_quota": 48, "borrowed": 40, "pending": 0}
    # Quota 1 counts its subtree: the service's one 8-GPU replica plus Quota 1.1's jobs.
    parent = _ok(admin.get(f"/api/v1/quotas/{q1}/"))["usage"]
    assert parent == {"in_quota": 8 + 48, "borrowed": 40, "pending": 0}

    # Previewing Quota 1.1 down to 40 would push the In-Quota job out of quota.
    preview = _ok(
        admin.post(
            f"/api/v1/quotas/{q11}/scale/preview/",
            {"resources": [{"node_pool": "H100", "min": {"gpu": 40}}]},
            format="json",
        )
    )
    assert [w["name"] for w in preview["not_in_quota"]] == ["own"]

    # The service scales up at 08:00: the borrowed job is preempted and requeued.
    _ok(alice.post(f"/api/v1/services/{svc}/scale/", {"replicas": 8}, format="json"))
    tick()
    job = _job(bob, borrowed)
    assert job["status"] == "Requeued"
    assert {p["status"] for p in job["pods"]} == {"Resource Preempted"}
    assert any(e["kind"] == "preempted" for e in job["events"])
    tick(30)
    running = [p for p in _ok(alice.get(f"/api/v1/services/{svc}/"))["pods"]]
    assert sum(p["status"] == "Running" for p in running) == 8

    # Rebalance 48/80 → 56/72, atomically, audited on both quotas.
    moved = _ok(
        admin.post(
            "/api/v1/quotas/rebalance/",
            {"from": "Quota 1.2", "to": "Quota 1.1", "gpu": 8},
            format="json",
        )
    )
    assert moved["source"]["resources"][0]["min"]["gpu"] == 72
    assert moved["target"]["resources"][0]["min"]["gpu"] == 56
    audit = _ok(admin.get(f"/api/v1/quotas/{q11}/audit/"))["results"]
    assert audit[0]["action"] == "rebalance" and audit[0]["actor"] == "admin"
    # Quota 1's usage is its subtree's: the service's 64 GPUs and Quota 1.1's In-Quota 48.
    assert _ok(admin.get(f"/api/v1/quotas/{q1}/"))["usage"]["in_quota"] == 64 + 48
    assert _ok(admin.get(f"/api/v1/quotas/{q11}/"))["usage"]["in_quota"] == 48
