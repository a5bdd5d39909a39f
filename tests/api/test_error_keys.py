"""Errors are keyed by the path of the field the client sent, in the request's shape.

One table per endpoint that takes a body: each bad body and the one path its error is
answered under (``("resources", "1", "min", "gpu")`` is ``{"resources": {"1": {"min": {"gpu":
[…]}}}}``, a list item under its index as DRF keys it), never a service's own field name
(``min_gpu``, ``target``, ``total_work``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from cluster.services import node_pool_create
from console.demo import Demo
from jobs.models import Workload
from quotas.models import Quota, QuotaAudit
from tests.jobs.conftest import service  # noqa: F401,F811  (the service fixture)

pytestmark = pytest.mark.django_db
NP = "A100-80G"
NON_FIELD = "non_field_errors"
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "job\u202egpj" reads as "jobjpg"


def leaves(body: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], list[str]]]:
    """Every (path, messages) of an error body."""
    if isinstance(body, dict):
        for key, value in body.items():
            yield from leaves(value, (*path, key))
    else:
        yield path, body


@dataclass
class Case:
    """One bad request: who sends what where, and the path and words of its error."""

    id: str
    method: str
    url: str
    body: dict[str, Any]
    path: tuple[Any, ...]
    words: str
    user: str = "admin"
    status: int = 400
    headers: dict[str, str] = field(default_factory=dict)


def _scale(*rows: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"resources": list(rows), **extra}


def _job(**changes: Any) -> dict[str, Any]:
    return {"workspace": "workspace_b", "name": "keyed", "gpu": 1, **changes}


def _service(**changes: Any) -> dict[str, Any]:
    base = {"workspace": "workspace_a", "quota": "Quota 1", "name": "svc", "gpu": 1}
    return {**base, "replicas": 1, "max_replicas": 2, **changes}


def _rule(**changes: Any) -> dict[str, Any]:
    return {"name": "morning", "cron": "0 8 * * *", "target_replicas": 2, **changes}


def _move(to: str, gpu: float) -> dict[str, Any]:
    return {"from": "Quota 1.1", "to": to, "gpu": gpu, "node_pool": NP}


def cases(ids: dict[str, int]) -> list[Case]:
    """The table; `ids` holds the rows' primary keys (q11, q1, ws_b, service)."""
    q11, q1, ws_b, svc = ids["q11"], ids["q1"], ids["ws_b"], ids["service"]
    scale, preview = f"/api/v1/quotas/{q11}/scale/", f"/api/v1/quotas/{q11}/scale/preview/"
    a100 = {"node_pool": NP, "min": {"gpu": 48}}
    return [
        # Quota scale and its preview: amounts at resources[i].min/max.<resource>.
        Case("scale-over-parent", "post", scale, _scale({"node_pool": NP, "min": {"gpu": 56}}),
             ("resources", "0", "min", "gpu"), "At most 48 GPUs fit"),
        Case("scale-second-row", "post", scale,
             _scale(a100, {"node_pool": "T4", "min": {"gpu": 1}}),
             ("resources", "1", "min", "gpu"), "on T4"),
        Case("scale-max-below-min", "post", scale,
             _scale({"node_pool": NP, "min": {"gpu": 40}, "max": {"gpu": 30}}),
             ("resources", "0", "max", "gpu"), "below its min"),
        Case("scale-not-a-number", "post", scale, _scale({"node_pool": NP, "min": {"gpu": "x"}}),
             ("resources", "0", "min", "gpu"), "not a number"),
        Case("scale-unknown-pool", "post", scale, _scale({"node_pool": "H9", "min": {"gpu": 1}}),
             ("resources", "0", "node_pool"), "No node pool named 'H9'."),
        Case("scale-stale-if-match", "post", scale, _scale(a100), ("If-Match",),
             "version 1, not 7", status=412, headers={"HTTP_IF_MATCH": '"7"'}),
        Case("scale-stale-body-version", "post", scale, _scale(a100, version=7), ("version",),
             "version 1, not 7", status=412),
        Case("preview-over-parent", "post", preview, _scale({"node_pool": NP, "min": {"gpu": 56}}),
             ("resources", "0", "min", "gpu"), "At most 48 GPUs fit"),
        # Quota create and settings.
        Case("create-over-parent", "post", "/api/v1/quotas/",
             {"name": "Quota 1.3", "parent": "Quota 1",
              "resources": [{"node_pool": NP, "min": {"gpu": 1}}]},
             ("resources", "0", "min", "gpu"), "At most 0 GPUs fit"),
        Case("create-control-name", "post", "/api/v1/quotas/",
             {"name": "Quota\x07", "parent": "Quota 1"}, ("name",), "U+0007"),
        Case("create-bidi-name", "post", "/api/v1/quotas/",
             {"name": f"Quota {RLO}1", "parent": "Quota 1"}, ("name",), "U+202E"),
        Case("create-spaced-name", "post", "/api/v1/quotas/",
             {"name": " Quota 9", "parent": "Quota 1"}, ("name",), "starts or ends with a space"),
        Case("create-unknown-parent", "post", "/api/v1/quotas/",
             {"name": "Quota 9", "parent": "nope"}, ("parent",), "No quota named 'nope'."),
        Case("patch-duplicate-name", "patch", f"/api/v1/quotas/{q11}/", {"name": "Quota 1.2"},
             ("name",), "already exists", status=409),
        Case("patch-weight", "patch", f"/api/v1/quotas/{q11}/", {"over_quota_weight": 0},
             ("over_quota_weight",), "above 0"),
        # Rebalance: its quotas are from and to, its amounts gpu, cpu and memory.
        Case("rebalance-same", "post", "/api/v1/quotas/rebalance/",
             _move("Quota 1.1", 1), ("to",), "two different"),
        Case("rebalance-not-siblings", "post", "/api/v1/quotas/rebalance/",
             _move("Quota 1", 1), ("to",), "not siblings"),
        Case("rebalance-too-much", "post", "/api/v1/quotas/rebalance/",
             _move("Quota 1.2", 49), ("gpu",), "cannot give"),
        Case("rebalance-unknown", "post", "/api/v1/quotas/rebalance/",
             _move("nope", 1), ("to",), "No quota named 'nope'."),
        Case("quota-delete-with-children", "delete", f"/api/v1/quotas/{q1}/", {},
             (NON_FIELD,), "has child quotas"),
        # Jobs: each refusal on the field sent, never total_work.
        Case("job-replicas-0", "post", "/api/v1/jobs/", _job(replicas=0), ("replicas",),
             "at least 1", user="bob"),
        Case("job-gpu-0", "post", "/api/v1/jobs/", _job(gpu=0), ("gpu",), "above 0", user="bob"),
        Case("job-priority", "post", "/api/v1/jobs/", _job(priority=10), ("priority",),
             "between 1 and 9", user="bob"),
        Case("job-checkpoint", "post", "/api/v1/jobs/", _job(checkpoint_interval=5),
             ("checkpoint_interval",), "at least 60", user="bob"),
        Case("job-upper-name", "post", "/api/v1/jobs/", _job(name="Train_1"), ("name",),
             "lower-case letters", user="bob"),
        Case("job-long-name", "post", "/api/v1/jobs/", _job(name="a" * 64), ("name",),
             "63", user="bob"),
        Case("job-spaced-name", "post", "/api/v1/jobs/", _job(name="train "), ("name",),
             "space", user="bob"),
        Case("job-bidi-name", "post", "/api/v1/jobs/", _job(name=f"job{RLO}gpj"), ("name",),
             "U+202E", user="bob"),
        Case("job-unknown-workspace", "post", "/api/v1/jobs/", _job(workspace="nope"),
             ("workspace",), "No workspace named 'nope'.", user="bob"),
        Case("job-unknown-quota", "post", "/api/v1/jobs/", _job(quota="nope"), ("quota",),
             "No quota named 'nope' in workspace_b.", user="bob"),
        # Services, their scale and their scaling rules.
        Case("service-replicas-over-max", "post", "/api/v1/services/",
             _service(replicas=3), ("replicas",), "within", user="alice"),
        Case("service-min-over-max", "post", "/api/v1/services/",
             _service(min_replicas=3), ("min_replicas",), "at most max", user="alice"),
        Case("service-scale-out-of-range", "post", f"/api/v1/services/{svc}/scale/",
             {"replicas": 99}, ("replicas",), "out of that range", user="alice"),
        Case("rule-upper-name", "post", f"/api/v1/services/{svc}/rules/", _rule(name="Day"),
             ("name",), "lower-case", user="alice"),
        Case("rule-cron", "post", f"/api/v1/services/{svc}/rules/", _rule(cron="61 8 * * *"),
             ("cron",), "out of range", user="alice"),
        Case("rule-target", "post", f"/api/v1/services/{svc}/rules/", _rule(target_replicas=99),
             ("target_replicas",), "out of that range", user="alice"),
        # Instances.
        Case("instance-short", "post", "/api/v1/instances/",
             {"workspace": "workspace_c", "name": "nb", "gpu": 1, "max_duration": 5},
             ("max_duration",), "at least 60", user="carol"),
        # Workspaces, members, usage rules.
        Case("workspace-name", "post", "/api/v1/workspaces/", {"name": "two words"}, ("name",),
             "only letters"),
        Case("workspace-spaced-name", "post", "/api/v1/workspaces/", {"name": "team-d "},
             ("name",), "space"),
        Case("member-unknown-user", "post", f"/api/v1/workspaces/{ws_b}/members/",
             {"user": "zed", "role": "viewer"}, ("user",), "No user named 'zed'."),
        Case("member-role", "post", f"/api/v1/workspaces/{ws_b}/members/",
             {"user": "carol", "role": "boss"}, ("role",), "not a valid choice"),
        Case("usage-rule-priority", "post", f"/api/v1/workspaces/{ws_b}/resource-usage/",
             {"quota": "Quota 1.1", "role": "viewer", "max_priority": 10}, ("max_priority",),
             "between 1 and 9"),
        Case("usage-rule-unbound", "post", f"/api/v1/workspaces/{ws_b}/resource-usage/",
             {"quota": "Quota 1.2", "role": "viewer"}, ("quota",), "No quota named 'Quota 1.2'"),
        # Cluster resources.
        Case("node-negative", "post", "/api/v1/nodes/",
             {"name": "n-1", "node_pool": NP, "gpus": -1, "cpu": 0, "memory": 0}, ("gpus",),
             "greater than or equal to 0"),
        Case("resource-pool-duplicate", "post", "/api/v1/resource-pools/", {"name": "general"},
             ("name",), "already exists", status=409),
    ]  # fmt: skip


@pytest.fixture
def ids(demo: Demo, service: Workload) -> dict[str, int]:  # noqa: F811
    """The primary keys the table's URLs name; a second node pool (T4) with no capacity."""
    node_pool_create(resource_pool=demo.resource_pool, name="T4", gpu_model="T4")
    return {
        "q11": demo.quotas["Quota 1.1"].pk,
        "q1": demo.quotas["Quota 1"].pk,
        "ws_b": demo.workspaces["workspace_b"].pk,
        "service": service.pk,
    }


CASE_IDS = [c.id for c in cases({"q11": 0, "q1": 0, "ws_b": 0, "service": 0})]


@pytest.mark.parametrize("index", range(len(CASE_IDS)), ids=CASE_IDS)
def test_a_refusal_is_keyed_by_the_path_the_client_sent(
    api: Any, ids: dict[str, int], index: int
) -> None:
    from django.contrib.auth import get_user_model

    case = cases(ids)[index]
    client = api(get_user_model().objects.get(username=case.user))
    send = getattr(client, case.method)
    response = send(case.url, case.body, format="json", **case.headers)
    assert response.status_code == case.status, response.json()
    errors = [(path, messages) for path, messages in leaves(response.json()) if path != ("etag",)]
    assert [path for path, _ in errors] == [case.path], response.json()
    assert case.words in errors[0][1][0], errors


def test_a_412_carries_the_current_etag(api: Any, admin: Any, ids: dict[str, int]) -> None:
    url = f"/api/v1/quotas/{ids['q11']}/scale/"
    body = _scale({"node_pool": NP, "min": {"gpu": 40}})
    response = api(admin).post(url, body, format="json", HTTP_IF_MATCH='"7"')
    assert response.status_code == 412
    assert response["ETag"] == '"1"' and response.json()["etag"] == '"1"'
    again = api(admin).post(url, body, format="json", HTTP_IF_MATCH=response["ETag"])
    assert again.status_code == 200 and again["ETag"] == '"2"'


def test_the_second_row_of_a_scale_is_answered_under_its_index(
    api: Any, admin: Any, ids: dict[str, int]
) -> None:
    body = _scale({"node_pool": NP, "min": {"gpu": 48}}, {"node_pool": "T4", "min": {"gpu": 1}})
    response = api(admin).post(f"/api/v1/quotas/{ids['q11']}/scale/", body, format="json")
    assert response.status_code == 400
    (message,) = response.json()["resources"]["1"]["min"]["gpu"]
    assert response.json() == {"resources": {"1": {"min": {"gpu": [message]}}}}


# Writes that change nothing record nothing ---------------------------------------------------


def test_a_scale_to_the_current_amounts_changes_nothing(api: Any, admin: Any, demo: Demo) -> None:
    q = demo.quotas["Quota 1.1"]
    body = _scale({"node_pool": NP, "min": {"gpu": 48}})
    same = api(admin).post(f"/api/v1/quotas/{q.pk}/scale/", body, format="json")
    assert same.status_code == 200 and same.json()["changed"] is False
    assert same["ETag"] == '"1"' and same.json()["version"] == 1
    assert Quota.objects.get(pk=q.pk).version == 1
    assert not QuotaAudit.objects.filter(quota=q, action="scale").exists()
    less = _scale({"node_pool": NP, "min": {"gpu": 40}})
    moved = api(admin).post(f"/api/v1/quotas/{q.pk}/scale/", less, format="json")
    assert moved.status_code == 200 and moved.json()["changed"] is True
    assert moved.json()["version"] == 2
    assert QuotaAudit.objects.filter(quota=q, action="scale").count() == 1


# One vocabulary for what is missing ----------------------------------------------------------


def test_missing_objects_answer_one_404_format(
    api: Any, admin: Any, bob: Any, ids: dict[str, int]
) -> None:
    ws_b, svc = ids["ws_b"], ids["service"]
    rule = "No scaling rule with id 999999 in service chat-api."
    expected = {
        "/api/v1/jobs/999999/": "No job with id 999999.",
        "/api/v1/services/999999/": "No service with id 999999.",
        "/api/v1/instances/999999/": "No instance with id 999999.",
        "/api/v1/quotas/999999/": "No quota with id 999999.",
        "/api/v1/quotas/999999/audit/": "No quota with id 999999.",
        "/api/v1/workspaces/999999/": "No workspace with id 999999.",
        "/api/v1/workspaces/999999/members/": "No workspace with id 999999.",
        f"/api/v1/workspaces/{ws_b}/members/zed/": "No member named 'zed' in workspace_b.",
        f"/api/v1/workspaces/{ws_b}/quotas/9999/": "No bound quota with id 9999 in workspace_b.",
        f"/api/v1/services/{svc}/rules/999999/": rule,
        "/api/v1/nodes/999999/": "No node with id 999999.",
        "/api/v1/node-pools/999999/": "No node pool with id 999999.",
        "/api/v1/resource-pools/999999/": "No resource pool with id 999999.",
    }  # fmt: skip
    for url, message in expected.items():
        response = api(admin).get(url)
        assert response.status_code == 404, url
        assert response.json() == {"detail": message}, url
    # Another team's job is missing for bob in the same words.
    alice_job = Workload.objects.get(pk=svc)
    response = api(bob).get(f"/api/v1/services/{alice_job.pk}/")
    assert response.json() == {"detail": f"No service with id {alice_job.pk}."}


# Current state by default ----------------------------------------------------------------------


@pytest.mark.parametrize("fast_paths", [True, False], ids=["fast", "stock"])
def test_a_services_pods_are_its_live_replicas_unless_history_is_asked(
    api: Any,
    alice: Any,
    service: Workload,  # noqa: F811
    settings: Any,
    fast_paths: bool,
) -> None:
    from django.utils import timezone

    from jobs.choices import PodStatus
    from jobs.models import Pod

    settings.TIDEPOOL_FAST_PATHS = fast_paths
    now = timezone.now()
    for attempt, status in enumerate((PodStatus.PREEMPTED, PodStatus.RUNNING)):
        Pod.objects.create(
            workload=service, index=0, attempt=attempt, status=status, created_at=now
        )
    client = api(alice)
    for url in (f"/api/v1/services/{service.pk}/", "/api/v1/services/"):
        body = client.get(url).json()
        shown = body if "pods" in body else body["results"][0]
        assert [(p["attempt"], p["status"]) for p in shown["pods"]] == [(1, PodStatus.RUNNING)]
        body = client.get(url, {"history": "1"}).json()
        shown = body if "pods" in body else body["results"][0]
        assert [p["attempt"] for p in shown["pods"]] == [0, 1]
    scaled = client.post(f"/api/v1/services/{service.pk}/scale/", {"replicas": 2}, format="json")
    assert [p["attempt"] for p in scaled.json()["pods"]] == [1]
