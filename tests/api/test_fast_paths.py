"""With TIDEPOOL_FAST_PATHS on or off (console.fast), the API answers the same bytes.

Each request runs twice, once through the speed layer (statements, values() rows) and once
through the stock ORM querysets and DRF serializers; a write runs in a transaction rolled
back after each, so both ways start from the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from jobs.choices import Kind
from jobs.models import Pod, Workload, WorkloadEvent
from quotas.models import Quota

from .test_query_counts import _seed, _vary

pytestmark = pytest.mark.django_db

PATHS = {"jobs": Kind.TRAINING, "services": Kind.INFERENCE, "instances": Kind.INTERACTIVE}


@pytest.fixture
def varied(demo: Any, bob: Any, clock: Any) -> None:
    """Workloads of every kind with every value a list shows, some pods on borrowed capacity."""
    _seed(demo, bob, clock, 30)
    _vary(demo, clock)
    Pod.objects.filter(index=1, attempt=0).update(borrowed=True)
    WorkloadEvent.objects.bulk_create(
        WorkloadEvent(workload=w, at=clock.now(), kind="admitted", message="m ✓", data={"a": 1})
        for w in Workload.objects.all()
    )
    for i, pk in enumerate(Workload.objects.order_by("id").values_list("pk", flat=True)):
        Workload.objects.filter(pk=pk).update(submitted_at=clock.now() - timedelta(hours=i))


def _both_ways(settings: Any, request: Callable[[], Any], *, write: bool = False) -> bytes:
    """The response's bytes, checked to be the same with the switch on and off."""
    answers = []
    for on in (True, False):
        settings.TIDEPOOL_FAST_PATHS = on
        with transaction.atomic():
            response = request()
            transaction.set_rollback(write)
        answers.append((response.status_code, response.content))
    assert answers[0] == answers[1], answers
    content: bytes = answers[0][1]
    return content


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("user", ["admin", "bob"])
def test_lists_and_details_answer_the_same_bytes_both_ways(
    api: Any, varied: None, settings: Any, path: str, user: str, request: Any
) -> None:
    client: APIClient = api(request.getfixturevalue(user))
    quota = Quota.objects.get(name="Quota 1.1")
    now = request.getfixturevalue("clock").now()
    after = (now - timedelta(hours=20)).isoformat().replace("+00:00", "Z")
    before = (now - timedelta(hours=5)).isoformat().replace("+00:00", "Z")
    lists = [
        "?page_size=1000",
        "?page_size=4&page=2",
        "?workspace=workspace_b&status=Running",
        f"?quota={quota.pk}",
        "?quota=Quota 1.1&owner=bob",
        "?name=w3",
        "?workspace=nowhere",
        "?page=99",  # 404 in both
        # The FilterSet's filters (jobs.filters.WorkloadFilter), and its refusals.
        "?status=running",
        "?status=RUNNING&quota=Quota 1.1&search=W1",
        "?in_quota=false",
        "?in_quota=true&preemptible=true",
        "?preemptible=false&page_size=5",
        "?node_pool=a-first",
        "?node_pool=a-first&in_quota=False&owner=bob",
        "?search=w2&page_size=3&page=2",
        "?submitted_after=2000-01-01T00:00:00Z",
        f"?submitted_after={after}&submitted_before={before}",
        "?name=",  # empty: no filter
        "?status=Bogus",  # 400 in both, naming the allowed values
        "?in_quota=maybe",
        "?submitted_before=yesterday",
        "?bogus=1&status=Running",  # 400: not a filter of this list
    ]
    for query in lists:
        _both_ways(settings, lambda q=query: client.get(f"/api/v1/{path}/{q}"))
    for pk in Workload.objects.filter(kind=PATHS[path]).values_list("pk", flat=True)[:5]:
        _both_ways(settings, lambda pk=pk: client.get(f"/api/v1/{path}/{pk}/"))
    _both_ways(settings, lambda: client.get(f"/api/v1/{path}/999999/"))  # 404 in both


@pytest.mark.parametrize("path", PATHS)
def test_action_answers_are_the_same_bytes_both_ways(
    api: Any, varied: None, bob: Any, settings: Any, path: str
) -> None:
    client: APIClient = api(bob)
    workload = Workload.objects.filter(kind=PATHS[path]).order_by("id").first()
    assert workload is not None
    action = "stop" if path == "instances" else "cancel"
    _both_ways(settings, lambda: client.post(f"/api/v1/{path}/{workload.pk}/{action}/"), write=True)
    if path == "services":
        scale = f"/api/v1/services/{workload.pk}/scale/"
        _both_ways(settings, lambda: client.post(scale, {"replicas": 3}, format="json"), write=True)


@pytest.mark.parametrize("path", PATHS)
def test_submits_answer_the_same_bytes_both_ways(
    api: Any, demo: Any, bob: Any, clock: Any, settings: Any, path: str
) -> None:
    body: dict[str, Any] = {"workspace": "workspace_b", "name": "twice", "gpu": 0.5}
    if path == "instances":
        body["max_duration"] = 3600
    client: APIClient = api(bob)
    shown = _both_ways(
        settings, lambda: client.post(f"/api/v1/{path}/", body, format="json"), write=True
    )
    assert b'"name":"twice"' in shown
    refused = {**body, "node_pools": ["nowhere"]}
    _both_ways(settings, lambda: client.post(f"/api/v1/{path}/", refused, format="json"))


def test_tokens_and_permissions_answer_alike_both_ways(
    api: Any, demo: Any, admin: Any, bob: Any, settings: Any
) -> None:
    """Token authentication and global permissions (a platform admin's cluster views)."""
    for user in (admin, bob):
        client: APIClient = api(user)
        for url in ("/api/v1/quotas/", "/api/v1/nodes/", "/api/v1/workspaces/"):
            _both_ways(settings, lambda c=client, u=url: c.get(u))
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    _both_ways(settings, lambda: stranger.get("/api/v1/jobs/"))
