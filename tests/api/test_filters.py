"""The workload lists' filters (jobs.filters.WorkloadFilter): each filters what it says, and a
list refuses what it cannot filter with 400 on the parameter, never the unfiltered list."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from jobs.choices import Kind, Status
from jobs.models import Workload
from quotas.models import NodePool

from .test_query_counts import _seed

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(demo: Any, bob: Any, clock: Any) -> dict[str, Any]:
    """12 of bob's workloads (4 of each kind), with varied labels, pools and times."""
    _seed(demo, bob, clock, 12)
    pool = NodePool.objects.create(resource_pool=demo.resource_pool, name="t4", gpu_model="T4")
    mine = Workload.objects.filter(name__regex=r"^w[0-9]+$").order_by("id")
    for i, w in enumerate(mine):
        j = i // 3  # each kind takes every label
        w.name = ("alpha", "beta")[j % 2] + str(i)
        w.in_quota = (None, True, False, True)[j]
        w.status = (Status.RUNNING, Status.QUEUED)[j % 2]
        w.submitted_at = clock.now() - timedelta(hours=i)
        w.save()
        if j % 2 == 0:
            w.node_pools.add(pool)
    return {"now": clock.now()}


def _names(client: APIClient, url: str) -> set[str]:
    response = client.get(url)
    assert response.status_code == 200, response.content
    return {w["name"] for w in response.json()["results"]}


def _expected(**lookups: Any) -> set[str]:
    found = Workload.objects.filter(name__regex=r"^(alpha|beta)", kind=Kind.TRAINING, **lookups)
    return set(found.values_list("name", flat=True))


@pytest.mark.parametrize(
    "query, lookups",
    [
        ("in_quota=true", {"in_quota": True}),
        ("in_quota=false", {"in_quota": False}),
        ("status=queued", {"status": Status.QUEUED}),
        ("status=RUNNING", {"status": Status.RUNNING}),
        ("node_pool=t4", {"node_pools__name": "t4"}),
        ("search=LPH", {"name__icontains": "lph"}),
        ("owner=bob&preemptible=true", {}),
    ],
    ids=["in-quota", "not-quota", "status-lower", "status-upper", "node-pool", "search", "owner"],
)
def test_job_list_filters_what_each_filter_says(
    api: Any, bob: Any, rows: dict[str, Any], query: str, lookups: dict[str, Any]
) -> None:
    client = api(bob)
    shown = _names(client, f"/api/v1/jobs/?page_size=1000&{query}")
    assert shown & _expected() == _expected(**lookups)
    assert shown


def test_submitted_after_and_before_bound_the_submit_time(
    api: Any, bob: Any, rows: dict[str, Any]
) -> None:
    now = rows["now"]
    after = (now - timedelta(hours=6, minutes=30)).isoformat()
    before = (now - timedelta(hours=2, minutes=30)).isoformat()
    query = {"submitted_after": after, "submitted_before": before, "page_size": 1000}
    response = api(bob).get("/api/v1/jobs/", query)
    assert response.status_code == 200
    shown = {w["name"] for w in response.json()["results"]}
    assert shown & _expected() == _expected(
        submitted_at__gte=now - timedelta(hours=6, minutes=30),
        submitted_at__lt=now - timedelta(hours=2, minutes=30),
    )


def test_preemptible_false_lists_no_training_job(api: Any, bob: Any, rows: Any) -> None:
    client = api(bob)
    assert _names(client, "/api/v1/jobs/?preemptible=false") == set()
    assert _names(client, "/api/v1/services/?preemptible=false")
    assert _names(client, "/api/v1/instances/?preemptible=true") == set()


@pytest.mark.parametrize("path", ["jobs", "services", "instances"])
def test_unknown_status_answers_400_naming_the_allowed_values(
    api: Any, bob: Any, demo: Any, path: str
) -> None:
    response = api(bob).get(f"/api/v1/{path}/?status=Bogus")
    assert response.status_code == 400
    (message,) = response.json()["status"]
    assert "Bogus is not one of" in message
    assert all(status in message for status in Status.values)


@pytest.mark.parametrize(
    "query, param",
    [
        ("in_quota=maybe", "in_quota"),
        ("preemptible=2", "preemptible"),
        ("submitted_after=yesterday", "submitted_after"),
        ("inquota=false", "inquota"),
        ("sort=name", "sort"),
    ],
    ids=["bad-boolean", "bad-preemptible", "bad-time", "misspelt-filter", "page-only-filter"],
)
def test_a_filter_the_list_cannot_apply_answers_400_on_its_parameter(
    api: Any, bob: Any, demo: Any, query: str, param: str
) -> None:
    response = api(bob).get(f"/api/v1/jobs/?{query}")
    assert response.status_code == 400, response.content
    assert list(response.json()) == [param]


def test_unknown_parameter_message_lists_the_allowed_ones(api: Any, bob: Any, demo: Any) -> None:
    response = api(bob).get("/api/v1/jobs/?in_qouta=false")
    assert response.status_code == 400
    (message,) = response.json()["in_qouta"]
    assert "in_quota" in message and "page_size" in message


def test_pagination_and_format_stay_allowed(api: Any, bob: Any, rows: Any) -> None:
    response = api(bob).get("/api/v1/jobs/?page=1&page_size=2&format=json&ordering=")
    assert response.status_code == 200, response.content


def test_other_lists_refuse_unknown_parameters_too(api: Any, admin: Any, demo: Any) -> None:
    client = api(admin)
    assert client.get("/api/v1/quotas/?bogus=1").status_code == 400
    assert client.get("/api/v1/quotas/?view=tree").status_code == 200
    assert client.get("/api/v1/usage/?bogus=1").status_code == 400


def test_a_detail_ignores_list_parameters(api: Any, bob: Any, rows: Any) -> None:
    pk = Workload.objects.filter(kind=Kind.TRAINING, owner=bob).values_list("pk", flat=True)[0]
    assert api(bob).get(f"/api/v1/jobs/{pk}/?bogus=1").status_code == 200


def test_anonymous_filtered_list_answers_401_not_400(api: Any, demo: Any) -> None:
    assert api(None).get("/api/v1/jobs/?status=Bogus").status_code == 401
