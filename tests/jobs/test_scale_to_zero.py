"""Inference scales to zero (the co-location document: "scale down to zero or to a minimum
number of replicas"): a service at 0 holds no GPUs, and scales up again on its rule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.errors import DomainError
from jobs.choices import LIVE_POD_STATUSES, PodStatus, Status
from jobs.models import Pod, Workload
from jobs.services.scaling import scaling_rule_create, scaling_rules_fire_due
from jobs.services.workloads import Shape, service_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(demo: Any, alice: Any, clock: Any) -> Workload:
    """chat-api as the demo seeds it: 8 GPUs a replica, 0 to 8, 8 at 08:00 and 0 at 22:00."""
    service = service_create(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="chat-api",
        shape=Shape(replicas=1, gpu=8000, priority=9),
        node_pools=[demo.node_pool],
        min_replicas=0,
        max_replicas=8,
        now=clock.now(),
    )
    for name, cron, target in (("day", "0 8 * * *", 8), ("night", "0 22 * * *", 0)):
        scaling_rule_create(
            service=service,
            name=name,
            cron=cron,
            timezone="UTC",
            target_replicas=target,
            now=clock.now(),
        )
    return service


def _live_gpus(service: Workload) -> int:
    """milli-GPU the service's live pods hold."""
    return service.gpu * service.pods.filter(status__in=LIVE_POD_STATUSES).count()


def test_at_22_00_the_service_goes_to_zero_and_training_takes_every_gpu(
    chat: Workload, bob: Any, submit: Any, tick: Any, clock: Any
) -> None:
    tick(30)
    tick(30)
    assert _live_gpus(chat) == 8000
    clock.set(clock.now().replace(hour=21, minute=59) + timedelta(days=1))
    scaling_rules_fire_due(now=clock.now() + timedelta(minutes=1))  # 22:00
    tick(60)
    chat.refresh_from_db()
    assert chat.replicas == 0 and _live_gpus(chat) == 0
    assert chat.status == Status.RUNNING and chat.in_quota is None
    assert chat.pods.filter(status=PodStatus.STOPPED, reason="Scaled down").count() == 1
    # Every GPU of the cluster is training's now: 16 jobs of 8 GPUs all run.
    jobs = [submit(bob, f"night-{i}", gpus=8, idle_policy="acceptable") for i in range(16)]
    tick(30)
    tick(30)
    assert {j.pk for j in jobs} == set(
        Workload.objects.filter(pk__in=[j.pk for j in jobs], status=Status.RUNNING).values_list(
            "pk", flat=True
        )
    )
    assert not Pod.objects.filter(workload=chat, status__in=LIVE_POD_STATUSES).exists()


def test_at_08_00_a_service_at_zero_scales_up_and_takes_its_gpus_back(
    chat: Workload, bob: Any, submit: Any, tick: Any, clock: Any
) -> None:
    clock.set(clock.now().replace(hour=22, minute=0) + timedelta(days=1))
    scaling_rules_fire_due(now=clock.now())
    tick(60)
    assert _live_gpus(Workload.objects.get(pk=chat.pk)) == 0
    borrowers = [submit(bob, f"b-{i}", gpus=8, idle_policy="acceptable") for i in range(16)]
    tick(30)
    assert Workload.objects.filter(pk__in=[b.pk for b in borrowers], status="Running").count()
    clock.set(clock.now().replace(hour=8, minute=0) + timedelta(days=1))
    scaling_rules_fire_due(now=clock.now())
    tick()
    tick(30)
    chat.refresh_from_db()
    assert chat.replicas == 8
    assert chat.pods.filter(status=PodStatus.RUNNING).count() == 8
    assert chat.in_quota is True


def test_min_replicas_may_be_zero_but_max_must_be_at_least_one(
    demo: Any, alice: Any, clock: Any
) -> None:
    kwargs = {
        "actor": alice,
        "workspace": demo.workspaces["workspace_a"],
        "quota": demo.quotas["Quota 1"],
        "node_pools": [demo.node_pool],
        "now": clock.now(),
    }
    idle = service_create(name="idle", shape=Shape(replicas=0, gpu=8000), min_replicas=0, **kwargs)
    assert (idle.replicas, idle.min_replicas, idle.max_replicas) == (0, 0, 1)
    with pytest.raises(DomainError) as refused:
        service_create(
            name="never",
            shape=Shape(replicas=0, gpu=8000),
            min_replicas=0,
            max_replicas=0,
            **kwargs,
        )
    assert refused.value.field == "max_replicas"


def test_the_api_creates_a_service_that_may_scale_to_zero_and_scales_it_there(
    demo: Any, alice: Any
) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    body = {"workspace": "workspace_a", "name": "api", "gpu": 8, "replicas": 1}
    created = client.post("/api/v1/services/", {**body, "min_replicas": 0, "max_replicas": 4})
    assert created.status_code == 201, created.content
    scaled = client.post(f"/api/v1/services/{created.json()['id']}/scale/", {"replicas": 0})
    assert scaled.status_code == 200, scaled.content
    assert scaled.json()["replicas"] == 0
