"""The API of quotas restricted to node pools: admins set and see them; a submit without
node pools defaults to the allowed ones, and one naming another pool is refused on its field."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.models import NodePool
from console.demo import Demo
from tests.quotas.builders import add_t4, allowed, restrict

pytestmark = pytest.mark.django_db


@pytest.fixture
def t4(demo: Demo) -> NodePool:
    """A T4 node pool (two 4-GPU nodes) next to the demo's A100s."""
    return add_t4(demo)


# --- API ---------------------------------------------------------------------------------------


def test_the_quota_api_sets_and_shows_the_allowed_pools(
    api: Any, demo: Demo, admin: Any, t4: NodePool
) -> None:
    url = f"/api/v1/quotas/{demo.quotas['Quota 1.1'].pk}/"
    assert api(admin).get(url).json()["allowed_node_pools"] == []
    response = api(admin).patch(url, {"allowed_node_pools": ["A100-80G"]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["allowed_node_pools"] == ["A100-80G"]
    lifted = api(admin).patch(url, {"allowed_node_pools": []}, format="json")
    assert lifted.json()["allowed_node_pools"] == [] and allowed("Quota 1.1") == []


def test_the_quota_api_creates_a_restricted_child(
    api: Any, demo: Demo, admin: Any, t4: NodePool
) -> None:
    body = {"name": "Quota 1.3", "parent": "Quota 1", "allowed_node_pools": ["T4"]}
    response = api(admin).post("/api/v1/quotas/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["allowed_node_pools"] == ["T4"]


def test_the_quota_api_refuses_a_wider_child_on_its_field(
    api: Any, demo: Demo, admin: Any, t4: NodePool
) -> None:
    restrict(admin, "Quota 1", demo.node_pool)
    url = f"/api/v1/quotas/{demo.quotas['Quota 1.1'].pk}/"
    response = api(admin).patch(url, {"allowed_node_pools": ["T4"]}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "allowed_node_pools": [
            "Quota 1.1 may only narrow its parent's node pools: Quota 1 allows A100-80G, not T4."
        ]
    }
    unknown = api(admin).patch(url, {"allowed_node_pools": ["H100"]}, format="json")
    assert unknown.status_code == 400 and "allowed_node_pools" in unknown.json()


@pytest.mark.parametrize("username", ["alice", "bob", None], ids=["member", "outsider", "anon"])
def test_only_platform_admins_restrict_a_quota_through_the_api(
    api: Any, demo: Demo, username: str | None, t4: NodePool
) -> None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username=username) if username else None
    url = f"/api/v1/quotas/{demo.quotas['Quota 1.1'].pk}/"
    response = api(user).patch(url, {"allowed_node_pools": ["T4"]}, format="json")
    assert response.status_code in (401, 403, 404)
    assert allowed("Quota 1.1") == []


def test_a_submit_without_node_pools_defaults_to_the_allowed_ones(
    api: Any, demo: Demo, admin: Any, bob: Any, t4: NodePool
) -> None:
    body = {"workspace": "workspace_b", "gpu": 1}
    free = api(bob).post("/api/v1/jobs/", {**body, "name": "free"}, format="json")
    assert free.status_code == 201 and free.json()["node_pools"] == ["A100-80G", "T4"]
    restrict(admin, "Quota 1", demo.node_pool)
    held = api(bob).post("/api/v1/jobs/", {**body, "name": "held"}, format="json")
    assert held.status_code == 201, held.content
    assert held.json()["node_pools"] == ["A100-80G"]


def test_a_submit_to_a_pool_the_quota_may_not_use_answers_400_on_node_pools(
    api: Any, demo: Demo, admin: Any, bob: Any, t4: NodePool
) -> None:
    restrict(admin, "Quota 1.1", demo.node_pool)
    body = {"workspace": "workspace_b", "name": "x", "gpu": 1, "node_pools": ["T4"]}
    response = api(bob).post("/api/v1/services/", body, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "node_pools": [
            "Quota 1.1 may not use node pool T4; its workloads may run only in A100-80G."
        ]
    }
