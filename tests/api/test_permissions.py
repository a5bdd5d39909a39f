"""Every endpoint × every persona × every action, driven by one table.

Cluster resources (pools, nodes, quotas, usage) are for platform admins: others see an empty
list and 404, and get 403 on writes. Workspace rows answer 404 outside the user's workspaces
and 403 for a write their role lacks. Anonymous requests answer 401.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

from jobs.models import UsageSample
from jobs.services.scaling import scaling_rule_create
from jobs.services.workloads import Shape, instance_start, job_submit, service_create
from quotas.amounts import Amounts
from quotas.services.quotas import quota_create

pytestmark = pytest.mark.django_db

PERSONAS = ("admin", "alice", "bob", "carol", None)
NP = "A100-80G"


@dataclass(frozen=True)
class Row:
    """One request and the status each persona gets (anonymous always gets 401)."""

    name: str
    method: str
    url: str
    expect: dict[str, int]
    body: dict[str, Any] | None = None
    # For lists: how many rows each persona sees.
    sees: dict[str, int] = field(default_factory=dict)


def everyone(code: int) -> dict[str, int]:
    return {p: code for p in PERSONAS if p}


def admin_only(code: int, others: int) -> dict[str, int]:
    return {"admin": code, "alice": others, "bob": others, "carol": others}


def team(owner: str, code: int, *, admin: int | None = None, others: int = 404) -> dict[str, int]:
    """The owner's team and the admin get `code`; the other teams get `others`."""
    result = {p: others for p in PERSONAS if p}
    result[owner] = code
    result["admin"] = code if admin is None else admin
    return result


CLUSTER_LIST = {"admin": 1, "alice": 0, "bob": 0, "carol": 0}
ROWS = [
    Row("resource-pools list", "get", "/resource-pools/", everyone(200), sees=CLUSTER_LIST),
    Row("resource-pools retrieve", "get", "/resource-pools/{pool}/", admin_only(200, 404)),
    Row(
        "resource-pools create",
        "post",
        "/resource-pools/",
        admin_only(201, 403),
        {"name": "lab"},
    ),
    Row("node-pools list", "get", "/node-pools/", everyone(200), sees=CLUSTER_LIST),
    Row("node-pools retrieve", "get", "/node-pools/{np}/", admin_only(200, 404)),
    Row(
        "node-pools create",
        "post",
        "/node-pools/",
        admin_only(201, 403),
        {"name": "T4", "resource_pool": "general", "gpu_model": "T4"},
    ),
    Row(
        "nodes list",
        "get",
        "/nodes/",
        everyone(200),
        sees={"admin": 16, "alice": 0, "bob": 0, "carol": 0},
    ),
    Row("nodes retrieve", "get", "/nodes/{node}/", admin_only(200, 404)),
    Row(
        "nodes create",
        "post",
        "/nodes/",
        admin_only(201, 403),
        {"name": "a100-99", "node_pool": NP, "gpus": 8, "cpu": 1000, "memory": 1024},
    ),
    Row(
        "nodes update (cordon)",
        "patch",
        "/nodes/{node}/",
        admin_only(200, 403),
        {"schedulable": False},
    ),
    Row(
        "nodes import",
        "post",
        "/nodes/import/",
        admin_only(201, 403),
        {"text": "name,pool,gpus,cpu,memory\nimp-1,A100-80G,8,1000,1024\n"},
    ),
    Row(
        "quotas list",
        "get",
        "/quotas/",
        everyone(200),
        sees={"admin": 4, "alice": 0, "bob": 0, "carol": 0},
    ),
    Row("quotas retrieve", "get", "/quotas/{q11}/", admin_only(200, 404)),
    Row(
        "quotas create",
        "post",
        "/quotas/",
        admin_only(201, 403),
        {"name": "Quota 2", "resource_pool": "general"},
    ),
    Row("quotas update", "patch", "/quotas/{q11}/", admin_only(200, 403), {"lend_idle": False}),
    Row("quotas delete", "delete", "/quotas/{spare}/", admin_only(204, 403)),
    Row(
        "quotas scale",
        "post",
        "/quotas/{q11}/scale/",
        admin_only(200, 403),
        {"resources": [{"node_pool": NP, "min": {"gpu": 40}}]},
    ),
    Row(
        "quotas scale preview",
        "post",
        "/quotas/{q11}/scale/preview/",
        admin_only(200, 404),
        {"resources": [{"node_pool": NP, "min": {"gpu": 40}}]},
    ),
    Row(
        "quotas rebalance",
        "post",
        "/quotas/rebalance/",
        admin_only(200, 403),
        {"from": "Quota 1.2", "to": "Quota 1.1", "gpu": 8},
    ),
    Row("quotas audit", "get", "/quotas/{q11}/audit/", admin_only(200, 404)),
    Row(
        "workspaces list",
        "get",
        "/workspaces/",
        everyone(200),
        sees={"admin": 3, "alice": 1, "bob": 1, "carol": 1},
    ),
    Row("workspaces retrieve", "get", "/workspaces/{ws_b}/", team("bob", 200)),
    Row("workspaces create", "post", "/workspaces/", admin_only(201, 403), {"name": "ws-new"}),
    Row(
        "workspaces update (time limits)",
        "patch",
        "/workspaces/{ws_b}/",
        team("bob", 403, admin=200),
        {"instance_max_duration": 28800},
    ),
    Row("workspaces replace", "put", "/workspaces/{ws_b}/", everyone(405), {"name": "x"}),
    Row("members list", "get", "/workspaces/{ws_b}/members/", team("bob", 200)),
    Row(
        "members create",
        "post",
        "/workspaces/{ws_b}/members/",
        team("bob", 403, admin=201),
        {"user": "alice", "role": "viewer"},
    ),
    Row(
        "members update",
        "patch",
        "/workspaces/{ws_b}/members/bob/",
        team("bob", 403, admin=200),
        {"role": "operator"},
    ),
    Row(
        "members delete",
        "delete",
        "/workspaces/{ws_b}/members/bob/",
        team("bob", 403, admin=204),
    ),
    Row("bound quotas list", "get", "/workspaces/{ws_b}/quotas/", team("bob", 200)),
    Row(
        "bound quotas create",
        "post",
        "/workspaces/{ws_b}/quotas/",
        team("bob", 403, admin=201),
        {"quota": "Quota 1"},
    ),
    Row(
        "bound quotas delete",
        "delete",
        "/workspaces/{ws_b}/quotas/{q11}/",
        team("bob", 403, admin=204),
    ),
    Row("resource-usage list", "get", "/workspaces/{ws_b}/resource-usage/", team("bob", 200)),
    Row(
        "resource-usage create",
        "post",
        "/workspaces/{ws_b}/resource-usage/",
        team("bob", 403, admin=201),
        {"quota": "Quota 1.1", "role": "viewer", "max_gpus": 8},
    ),
    Row(
        "resource-usage update",
        "patch",
        "/workspaces/{ws_b}/resource-usage/{rule_b}/",
        team("bob", 403, admin=200),
        {"max_priority": 5},
    ),
    Row(
        "resource-usage delete",
        "delete",
        "/workspaces/{ws_b}/resource-usage/{rule_b}/",
        team("bob", 403, admin=204),
    ),
    Row(
        "jobs list",
        "get",
        "/jobs/",
        everyone(200),
        sees={"admin": 1, "alice": 0, "bob": 1, "carol": 0},
    ),
    Row("jobs retrieve", "get", "/jobs/{job}/", team("bob", 200)),
    Row(
        "jobs create",
        "post",
        "/jobs/",
        team("bob", 201, others=400),
        {"workspace": "workspace_b", "name": "new", "gpu": 1},
    ),
    Row("jobs update", "put", "/jobs/{job}/", everyone(405), {"name": "x"}),
    Row("jobs delete", "delete", "/jobs/{job}/", everyone(405)),
    Row("jobs cancel", "post", "/jobs/{job}/cancel/", team("bob", 200)),
    Row(
        "services list",
        "get",
        "/services/",
        everyone(200),
        sees={"admin": 1, "alice": 1, "bob": 0, "carol": 0},
    ),
    Row("services retrieve", "get", "/services/{svc}/", team("alice", 200)),
    Row(
        "services create",
        "post",
        "/services/",
        team("alice", 201, others=400),
        {"workspace": "workspace_a", "name": "svc2", "gpu": 1},
    ),
    Row("services delete", "delete", "/services/{svc}/", everyone(405)),
    Row("services scale", "post", "/services/{svc}/scale/", team("alice", 200), {"replicas": 2}),
    Row("services cancel", "post", "/services/{svc}/cancel/", team("alice", 200)),
    Row("rules list", "get", "/services/{svc}/rules/", team("alice", 200)),
    Row("rules retrieve", "get", "/services/{svc}/rules/{rule}/", team("alice", 200)),
    Row(
        "rules create",
        "post",
        "/services/{svc}/rules/",
        team("alice", 201),
        {"name": "day", "cron": "0 8 * * *", "target_replicas": 2},
    ),
    Row(
        "rules update",
        "patch",
        "/services/{svc}/rules/{rule}/",
        team("alice", 200),
        {"target_replicas": 3},
    ),
    Row("rules delete", "delete", "/services/{svc}/rules/{rule}/", team("alice", 204)),
    Row(
        "instances list",
        "get",
        "/instances/",
        everyone(200),
        sees={"admin": 1, "alice": 0, "bob": 0, "carol": 1},
    ),
    Row("instances retrieve", "get", "/instances/{inst}/", team("carol", 200)),
    Row(
        "instances create",
        "post",
        "/instances/",
        team("carol", 201, others=400),
        {"workspace": "workspace_c", "name": "nb2", "gpu": 1, "max_duration": 3600},
    ),
    Row("instances stop", "post", "/instances/{inst}/stop/", team("carol", 200)),
    Row(
        "usage list",
        "get",
        "/usage/",
        everyone(200),
        sees={"admin": 1, "alice": 0, "bob": 0, "carol": 0},
    ),
]


@pytest.fixture
def world(demo: Any, clock: Any) -> dict[str, Any]:
    """The demo plus one workload per team, a scaling rule, a spare quota, a usage sample."""
    users = {u.username: u for u in get_user_model().objects.all()}
    now = clock.now()
    ws = demo.workspaces
    job = job_submit(
        actor=users["bob"],
        workspace=ws["workspace_b"],
        quota=demo.quotas["Quota 1.1"],
        name="resnet",
        shape=Shape(replicas=1, gpu=8000),
        node_pools=[demo.node_pool],
        now=now,
    )
    svc = service_create(
        actor=users["alice"],
        workspace=ws["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="chat-api",
        shape=Shape(replicas=1, gpu=8000),
        node_pools=[demo.node_pool],
        min_replicas=1,
        max_replicas=8,
        now=now,
    )
    rule = scaling_rule_create(
        service=svc, name="night", cron="0 22 * * *", timezone="UTC", target_replicas=1, now=now
    )
    inst = instance_start(
        actor=users["carol"],
        workspace=ws["workspace_c"],
        quota=demo.quotas["Quota 1.2"],
        name="notebook",
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        max_duration=3600,
        now=now,
    )
    spare = quota_create(
        actor=users["admin"],
        name="Spare",
        resource_pool=demo.resource_pool,
        resources={demo.node_pool: Amounts()},
    )
    UsageSample.objects.create(at=now, quota=demo.quotas["Quota 1"], gpu_in_quota=8000)
    return {
        "users": users,
        "pool": demo.resource_pool.pk,
        "np": demo.node_pool.pk,
        "node": demo.node_pool.nodes.order_by("name").first().pk,
        "q11": demo.quotas["Quota 1.1"].pk,
        "spare": spare.pk,
        "ws_b": ws["workspace_b"].pk,
        "rule_b": ws["workspace_b"].usage_rules.order_by("pk").first().pk,
        "job": job.pk,
        "svc": svc.pk,
        "rule": rule.pk,
        "inst": inst.pk,
    }


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_permission_matrix(api: Any, world: dict[str, Any], row: Row) -> None:
    """Each persona's request runs in a savepoint rolled back after it, so all start alike."""
    url = "/api/v1" + row.url.format(**world)
    got: dict[str | None, Any] = {}
    want: dict[str | None, Any] = {}
    for persona in PERSONAS:
        user = world["users"][persona] if persona else None
        with transaction.atomic():
            response = getattr(api(user), row.method)(url, row.body, format="json")
            transaction.set_rollback(True)
        expected = 401 if persona is None else row.expect[persona]
        want[persona] = expected
        got[persona] = response.status_code
        if response.status_code != expected:
            got[persona] = (response.status_code, response.content[:300])
        elif persona and row.sees and expected == 200:
            want[persona] = (expected, row.sees[persona])
            got[persona] = (expected, response.json()["count"])
    assert got == want


def test_anonymous_gets_a_token_challenge(api: Any, world: dict[str, Any]) -> None:
    response = api(None).get("/api/v1/jobs/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_a_viewer_may_read_but_not_submit_or_cancel(api: Any, world: dict[str, Any]) -> None:
    from workspaces.models import Workspace
    from workspaces.services import workspace_member_add

    alice = world["users"]["alice"]
    workspace_member_add(
        workspace=Workspace.objects.get(name="workspace_b"), user=alice, role="viewer"
    )
    client = api(alice)
    assert client.get(f"/api/v1/jobs/{world['job']}/").status_code == 200
    assert client.post(f"/api/v1/jobs/{world['job']}/cancel/").status_code == 403
    body = {"workspace": "workspace_b", "name": "nope", "gpu": 1}
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 403
