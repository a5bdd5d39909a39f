"""A job that could never run is refused at submit, on its field, with the numbers: through the
page's form and through the API (the demo: 16 nodes of 8 GPUs, 128 cores, 1 TiB in A100-80G)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cluster.services import node_create, node_pool_create
from jobs.models import Workload
from quotas.amounts import Amounts
from quotas.services.quotas import quota_scale

pytestmark = pytest.mark.django_db

WS = "workspace_b"


Scale = tuple[tuple[str, int, int | None], ...]


def _limit(demo: Any, admin: Any, scales: Scale | None) -> None:
    """Scale quotas in order: (name, min GPUs, max GPUs or None)."""
    for quota, low, high in scales or ():
        amounts = Amounts(min_gpu=low * 1000, max_gpu=None if high is None else high * 1000)
        quota_scale(actor=admin, quota=demo.quotas[quota], resources={demo.node_pool: amounts})


# (id, form fields, API fields, setup, field, the words of the message)
CASES = [
    (
        "replica-bigger-than-any-node",
        {"replicas": "1", "gpu": "16"},
        {"replicas": 1, "gpu": 16},
        None,
        "gpu",
        "GPUs per replica: the job asks 16 GPUs a replica; the largest node in pool A100-80G "
        "has 8 GPUs.",
    ),
    (
        "replica-with-more-cpu-than-any-node",
        {"replicas": "1", "gpu": "1", "cpu": "200"},
        {"replicas": 1, "gpu": 1, "cpu": 200_000},
        None,
        "cpu",
        "CPU per replica: the job asks 200 cores a replica; the largest node in pool "
        "A100-80G has 128.",
    ),
    (
        "more-gpus-than-the-pool-has",
        {"replicas": "17", "gpu": "8"},
        {"replicas": 17, "gpu": 8},
        None,
        "replicas",
        "Replicas: the job asks 136 GPUs (17 replicas × 8 GPUs); pool A100-80G has 128 GPUs in "
        "all, and a job runs within one node pool.",
    ),
    (
        "more-replicas-than-the-nodes-hold",
        {"replicas": "17", "gpu": "6", "cpu": "8", "memory": "64"},
        {"replicas": 17, "gpu": 6, "cpu": 8000, "memory": 65536},
        None,
        "replicas",
        "Replicas: the job asks 17 replicas of 6 GPUs, 8 cores and 64 GiB; the nodes of pool "
        "A100-80G hold at most 16 such replicas at once.",
    ),
    (
        "more-than-its-quota-max",
        {"replicas": "8", "gpu": "8", "idle_policy": "acceptable"},
        {"replicas": 8, "gpu": 8, "idle_policy": "acceptable"},
        (("Quota 1.1", 48, 56),),
        "replicas",
        "Replicas: the job asks 64 GPUs (8 replicas × 8 GPUs), but Quota 1.1 may use at most "
        "56 GPUs in pool A100-80G (its max, borrowed GPUs included).",
    ),
    (
        "more-than-its-parents-max",
        {"replicas": "8", "gpu": "8", "idle_policy": "idle_only"},
        {"replicas": 8, "gpu": 8, "idle_policy": "idle_only"},
        (("Quota 1.2", 0, None), ("Quota 1", 48, 56)),
        "replicas",
        "Replicas: the job asks 64 GPUs (8 replicas × 8 GPUs), but Quota 1 may use at most "
        "56 GPUs in pool A100-80G (its max, borrowed GPUs included).",
    ),
]
IDS = [c[0] for c in CASES]


def _form_data(demo: Any, **changes: str) -> dict[str, Any]:
    data = {
        "name": "too-big",
        "quota": demo.quotas["Quota 1.1"].pk,
        "node_pool": demo.node_pool.pk,
        "replicas": "1",
        "gpu": "1",
        "cpu": "8",
        "memory": "64",
        "priority": "5",
        "idle_policy": "none",
        "checkpoint_minutes": "30",
        "work_hours": "",
        "fault_tolerance": "on",
        "max_restarts": "3",
        "restart_mode": "sync",
    }
    return {**data, **changes}


@pytest.mark.parametrize(("case", "form", "body", "setup", "field", "message"), CASES, ids=IDS)
def test_the_submit_form_refuses_a_job_that_never_fits_with_its_numbers(
    demo: Any,
    login: Any,
    admin: Any,
    bob: Any,
    case: str,
    form: dict[str, str],
    body: dict[str, Any],
    setup: Scale | None,
    field: str,
    message: str,
) -> None:
    _limit(demo, admin, setup)
    response = login(bob).post(reverse("jobs:job_submit", args=[WS]), _form_data(demo, **form))
    assert response.status_code == 200
    assert response.context["form"].errors == {field: [message]}
    assert not Workload.objects.filter(name="too-big").exists()


@pytest.mark.parametrize(("case", "form", "body", "setup", "field", "message"), CASES, ids=IDS)
def test_the_api_refuses_a_job_that_never_fits_keyed_by_its_field(
    demo: Any,
    admin: Any,
    bob: Any,
    case: str,
    form: dict[str, str],
    body: dict[str, Any],
    setup: Scale | None,
    field: str,
    message: str,
) -> None:
    _limit(demo, admin, setup)
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=bob)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    response = client.post(
        "/api/v1/jobs/",
        {"workspace": WS, "quota": "Quota 1.1", "name": "too-big", **body},
        format="json",
    )
    assert (response.status_code, response.json()) == (400, {field: [message]})
    assert not Workload.objects.filter(name="too-big").exists()


def test_a_job_fits_if_one_accepted_pool_holds_it(demo: Any, admin: Any, bob: Any) -> None:
    """Over the API a job may accept several pools: one that holds it is enough, and a
    refusal names the largest node of them all."""
    t4 = node_pool_create(resource_pool=demo.node_pool.resource_pool, name="T4", gpu_model="T4")
    node_create(node_pool=t4, name="t4-01", gpus=4, cpu=64_000, memory=262_144)
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=bob)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    base = {"workspace": WS, "quota": "Quota 1.1", "node_pools": ["T4", "A100-80G"]}
    ok = client.post("/api/v1/jobs/", {**base, "name": "fits", "gpu": 8}, format="json")
    assert ok.status_code == 201, ok.json()
    refused = client.post("/api/v1/jobs/", {**base, "name": "big", "gpu": 12}, format="json")
    assert refused.json() == {
        "gpu": [
            "GPUs per replica: the job asks 12 GPUs a replica; the largest node in pools "
            "A100-80G, T4 has 8 GPUs."
        ]
    }


def test_a_pool_without_nodes_yet_refuses_nothing(demo: Any, admin: Any, bob: Any) -> None:
    """Nodes join a pool after it is made (Kubernetes): until then the job waits and the
    scheduler says why."""
    node_pool_create(resource_pool=demo.node_pool.resource_pool, name="H100", gpu_model="H100")
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=bob)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    response = client.post(
        "/api/v1/jobs/",
        {"workspace": WS, "quota": "Quota 1.1", "name": "early", "gpu": 16, "node_pools": ["H100"]},
        format="json",
    )
    assert response.status_code == 201, response.json()
