"""API behaviour: errors on their field, If-Match/ETag and 412, tokens, CSRF, schema, docs."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from jobs.models import UsageSample
from quotas.models import Quota, QuotaAudit

pytestmark = pytest.mark.django_db
NP = "A100-80G"


def _scale(gpus: float) -> dict[str, Any]:
    return {"resources": [{"node_pool": NP, "min": {"gpu": gpus}}]}


def test_retrieve_sends_the_version_as_etag(api: Any, admin: Any, demo: Any) -> None:
    q = demo.quotas["Quota 1.1"]
    response = api(admin).get(f"/api/v1/quotas/{q.pk}/")
    assert response["ETag"] == '"1"' and response.json()["version"] == 1


def test_scale_with_a_stale_if_match_answers_412(api: Any, admin: Any, demo: Any) -> None:
    client, q = api(admin), demo.quotas["Quota 1.1"]
    first = client.post(
        f"/api/v1/quotas/{q.pk}/scale/", _scale(40), format="json", HTTP_IF_MATCH='"1"'
    )
    assert first.status_code == 200 and first["ETag"] == '"2"'
    stale = client.post(
        f"/api/v1/quotas/{q.pk}/scale/", _scale(30), format="json", HTTP_IF_MATCH='"1"'
    )
    assert stale.status_code == 412 and stale["ETag"] == '"2"'
    assert "version 2, not 1" in stale.json()["If-Match"][0]
    assert stale.json()["etag"] == '"2"'
    assert Quota.objects.get(pk=q.pk).resources.get().min_gpu == 40_000


def test_patch_with_a_stale_if_match_answers_412_and_changes_nothing(
    api: Any, admin: Any, demo: Any
) -> None:
    client, q = api(admin), demo.quotas["Quota 1.1"]
    ok = client.patch(
        f"/api/v1/quotas/{q.pk}/", {"lend_idle": False}, format="json", HTTP_IF_MATCH='W/"1"'
    )
    assert ok.status_code == 200 and ok.json()["lend_idle"] is False
    stale = client.patch(
        f"/api/v1/quotas/{q.pk}/",
        {"name": "renamed", "child_preemption": True},
        format="json",
        HTTP_IF_MATCH='"1"',
    )
    assert stale.status_code == 412
    q.refresh_from_db()
    assert q.name == "Quota 1.1" and q.child_preemption is False


def test_patch_settings_and_child_preemption_together(api: Any, admin: Any, demo: Any) -> None:
    q = demo.quotas["Quota 1.2"]
    response = api(admin).patch(
        f"/api/v1/quotas/{q.pk}/",
        {"over_quota_weight": 2.5, "child_preemption": True, "version": 1},
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert body["over_quota_weight"] == 2.5 and body["child_preemption"] is True
    assert response["ETag"] == f'"{body["version"]}"'


def test_a_malformed_if_match_is_a_400(api: Any, admin: Any, demo: Any) -> None:
    q = demo.quotas["Quota 1.1"]
    response = api(admin).post(
        f"/api/v1/quotas/{q.pk}/scale/", _scale(40), format="json", HTTP_IF_MATCH="banana"
    )
    assert response.status_code == 400 and "If-Match" in response.json()


def test_scale_refused_for_lack_of_room_names_the_numbers(api: Any, admin: Any, demo: Any) -> None:
    q = demo.quotas["Quota 1.1"]
    response = api(admin).post(f"/api/v1/quotas/{q.pk}/scale/", _scale(56), format="json")
    assert response.status_code == 400
    message = (
        "Quota 1 has 128 GPUs on A100-80G and its children would need 136 GPUs "
        "(Quota 1.1 56 GPUs + Quota 1.2 80 GPUs). At most 48 GPUs fit for Quota 1.1."
    )
    assert response.json() == {"resources": {"0": {"min": {"gpu": [message]}}}}
    assert QuotaAudit.objects.filter(quota=q, action="scale").count() == 0


def test_refused_rebalance_changes_neither_quota(api: Any, admin: Any, demo: Any) -> None:
    response = api(admin).post(
        "/api/v1/quotas/rebalance/",
        {"from": "Quota 1.1", "to": "Quota 1.2", "gpu": 49},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "gpu": ["Quota 1.1 guarantees 48 GPUs on A100-80G; it cannot give 49 GPUs."]
    }
    mins = {q.name: q.resources.get().min_gpu for q in Quota.objects.exclude(name="Quota 1")}
    assert mins == {"Quota 1.1": 48_000, "Quota 1.2": 80_000}


def test_refused_quota_create_leaves_no_quota(api: Any, admin: Any, demo: Any) -> None:
    body = {
        "name": "Quota 1.3",
        "parent": "Quota 1",
        "resources": [{"node_pool": NP, "min": {"gpu": 1}}],
    }
    response = api(admin).post("/api/v1/quotas/", body, format="json")
    assert (
        response.status_code == 400
        and "At most 0 GPUs fit for Quota 1.3" in response.json()["resources"]["0"]["min"]["gpu"][0]
    )
    assert not Quota.objects.filter(name="Quota 1.3").exists()


def test_job_errors_name_the_field_with_the_domain_message(api: Any, bob: Any) -> None:
    client = api(bob)
    base = {"workspace": "workspace_b", "name": "x"}
    response = client.post("/api/v1/jobs/", {**base, "gpu": 1.5}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "gpu": [
            "1.5 GPUs per replica: a fraction is only allowed below one GPU (GPU sharing); "
            "above one, ask for whole GPUs."
        ]
    }
    response = client.post("/api/v1/jobs/", {**base, "gpu": 1, "priority": 12}, format="json")
    assert response.json() == {"priority": ["Priority must be between 1 and 9, not 12."]}
    response = client.post("/api/v1/jobs/", {**base, "gpu": "0.0001"}, format="json")
    assert response.json() == {"gpu": ["0.0001 GPUs is finer than 1/1000 of a GPU."]}
    response = client.post(
        "/api/v1/jobs/", {**base, "workspace": "workspace_a", "gpu": 1}, format="json"
    )
    assert response.status_code == 400 and "workspace" in response.json()


def test_submit_resolves_workspace_node_pools_and_name_or_names_the_field(
    api: Any, bob: Any
) -> None:
    client = api(bob)
    base = {"workspace": "workspace_b", "name": "resolve", "gpu": 1}
    unknown = "No workspace named '%s'."
    for workspace in ("nope", "workspace_a"):  # another team's workspace does not exist for bob
        response = client.post("/api/v1/jobs/", {**base, "workspace": workspace}, format="json")
        assert response.status_code == 400
        assert response.json() == {"workspace": [unknown % workspace]}
    response = client.post("/api/v1/jobs/", {**base, "workspace": 7}, format="json")
    assert response.status_code == 400 and response.json() == {"workspace": [unknown % 7]}
    response = client.post("/api/v1/jobs/", {**base, "node_pools": ["H100"]}, format="json")
    assert response.status_code == 400
    assert response.json() == {"node_pools": ["No node pool named 'H100' for Quota 1.1."]}
    response = client.post("/api/v1/jobs/", {**base, "node_pools": [NP]}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["node_pools"] == [NP]
    again = client.post("/api/v1/jobs/", base, format="json")
    assert again.status_code == 409  # Conflict: the name is taken
    assert again.json() == {"name": ["workspace_b already has a workload named resolve."]}


def test_a_submit_without_a_choosable_quota_names_the_usable_ones(
    api: Any, bob: Any, demo: Any
) -> None:
    from workspaces.choices import Role
    from workspaces.services import UsageRuleInput, resource_usage_rules_save, workspace_quota_bind

    ws, parent = demo.workspaces["workspace_b"], demo.quotas["Quota 1"]
    workspace_quota_bind(workspace=ws, quota=parent)
    rules = [
        UsageRuleInput(q, role) for q in (parent, demo.quotas["Quota 1.1"]) for role in Role.values
    ]
    resource_usage_rules_save(workspace=ws, rules=rules)
    body = {"workspace": "workspace_b", "name": "which", "gpu": 1}
    response = api(bob).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "quota": ["Name the quota (quotas you may use here: Quota 1, Quota 1.1)."]
    }
    named = api(bob).post("/api/v1/jobs/", {**body, "quota": "Quota 1"}, format="json")
    assert named.status_code == 201, named.json()


def test_a_viewer_submit_answers_403_before_the_service_checks_its_body(
    api: Any, alice: Any, bob: Any, demo: Any
) -> None:
    """The service checks the submit permission first: a viewer learns nothing from the body."""
    from workspaces.services import workspace_member_add

    workspace_member_add(workspace=demo.workspaces["workspace_b"], user=alice, role="viewer")
    base = {"workspace": "workspace_b", "name": "x", "gpu": 1}
    assert api(bob).post("/api/v1/jobs/", base, format="json").status_code == 201
    for body in (base, {**base, "quota": "Quota 1.1"}, {**base, "gpu": 1.5, "priority": 12}):
        response = api(alice).post("/api/v1/jobs/", body, format="json")
        assert response.status_code == 403, body
        assert "needs submit_workspace" in response.json()["detail"]


def test_lists_filter_by_workspace_status_quota_and_owner(
    api: Any, admin: Any, bob: Any, carol: Any, clock: Any
) -> None:
    for user, ws, name in ((bob, "workspace_b", "b1"), (carol, "workspace_c", "c1")):
        body = {"workspace": ws, "name": name, "gpu": 1}
        assert api(user).post("/api/v1/jobs/", body, format="json").status_code == 201
    client = api(admin)

    def names(query: str) -> list[str]:
        return [j["name"] for j in client.get(f"/api/v1/jobs/?{query}").json()["results"]]

    assert names("workspace=workspace_b") == ["b1"]
    assert names("quota=Quota 1.2") == ["c1"]
    assert names("owner=bob&status=Queued") == ["b1"]
    assert names("status=Running") == []


def test_usage_series_filters_by_quota_and_since(
    api: Any, admin: Any, demo: Any, clock: Any
) -> None:
    q = demo.quotas["Quota 1"]
    t0 = clock.now()
    for minute in range(3):
        UsageSample.objects.create(at=t0 + timedelta(minutes=minute), quota=q, gpu_in_quota=8000)
    since = (t0 + timedelta(minutes=1)).isoformat()
    response = api(admin).get("/api/v1/usage/", {"quota": "Quota 1", "since": since})
    rows = response.json()["results"]
    assert [r["gpu_in_quota"] for r in rows] == [8, 8] and rows[0]["quota"] == "Quota 1"
    assert api(admin).get("/api/v1/usage/", {"since": "yesterday"}).status_code == 400


def test_token_login_and_throttle(db: None, demo: Any) -> None:
    client = APIClient()
    response = client.post("/api/v1/auth/token/", {"username": "bob", "password": "tidepool-bob"})
    assert response.status_code == 200 and len(response.json()["token"]) == 40
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert client.get("/api/v1/jobs/").status_code == 200
    wrong = APIClient()
    codes = [
        wrong.post("/api/v1/auth/token/", {"username": "bob", "password": "no"}).status_code
        for _ in range(21)
    ]
    assert codes[:19] == [400] * 19 and codes[-1] == 429


def test_session_auth_needs_csrf(db: None, bob: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    assert client.get("/api/v1/jobs/").status_code == 200
    body = {"workspace": "workspace_b", "name": "s1", "gpu": 1}
    refused = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    client.get("/login/")
    token = client.cookies["csrftoken"].value
    ok = client.post("/api/v1/jobs/", body, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert ok.status_code == 201


def test_node_import_refuses_the_whole_file_naming_the_line(
    api: Any, admin: Any, demo: Any
) -> None:
    text = "name,pool,gpus,cpu,memory\nn-1,A100-80G,8,1000,1024\nn-2,A100-80G,eight,1000,1024\n"
    response = api(admin).post("/api/v1/nodes/import/", {"text": text}, format="json")
    assert response.status_code == 400
    assert response.json() == {"file": ["line 3: gpus 'eight' is not a whole number"]}
    assert api(admin).get("/api/v1/nodes/?name=n-1").json()["count"] == 0


def test_node_import_takes_an_uploaded_yaml_file(api: Any, admin: Any, demo: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    spec = (
        b"node_pools:\n  - name: T4\n    gpu_model: T4\n"
        b"nodes:\n  - {name: t4-1, pool: T4, gpus: 4, cpu: 32000, memory: 65536}\n"
    )
    upload = SimpleUploadedFile("cluster.yaml", spec, content_type="application/yaml")
    response = api(admin).post("/api/v1/nodes/import/", {"file": upload}, format="multipart")
    assert response.status_code == 201, response.content
    assert response.json()["pools_created"] == ["T4"]


def test_schema_generates_without_warnings(tmp_path: Any) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    for path in (
        "/api/v1/quotas/{id}/scale/preview/",
        "/api/v1/services/{service_id}/rules/",
        "/api/v1/auth/token/",
    ):
        assert path in text


def test_swagger_ui_is_served_from_local_static_files(client: Client) -> None:
    response = client.get("/api/v1/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    urls = re.findall(r'(?:src|href)=["\']([^"\']+)["\']', html) + re.findall(
        r'"(https?://[^"]+)"', html
    )
    assert any("swagger-ui" in u for u in urls)
    assert all(not u.startswith(("http://", "https://", "//")) for u in urls), urls
    assert "/api/v1/schema/" in html
