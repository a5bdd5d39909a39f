"""Submitting to a quota restricted to node pools: a pool it may not use is refused with the
pools it may use; the forms offer only those; a queued job left outside them waits, saying why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.urls import reverse

from cluster.models import NodePool
from console.errors import DomainError
from jobs.choices import Status
from jobs.models import Workload
from jobs.services.workloads import Shape, job_submit
from tests.jobs.test_forms import WS, _job
from tests.quotas.builders import add_t4, restrict
from workspaces.choices import Role
from workspaces.services import resource_usage_rule_set, workspace_quota_bind

pytestmark = pytest.mark.django_db


@pytest.fixture
def t4(demo: Any) -> NodePool:
    """A T4 node pool (two 4-GPU nodes) next to the demo's A100s."""
    return add_t4(demo)


def submit_to(bob: Any, demo: Any, pools: list[NodePool], name: str = "resnet") -> Workload:
    """Bob submits a one-GPU job to Quota 1.1 accepting the given node pools."""
    return job_submit(
        actor=bob,
        workspace=demo.workspaces[WS],
        quota=demo.quotas["Quota 1.1"],
        name=name,
        shape=Shape(replicas=1, gpu=1000),
        node_pools=pools,
    )


@pytest.mark.parametrize("restricted", ["Quota 1.1", "Quota 1"], ids=["own", "parent"])
def test_a_submit_to_a_pool_the_quota_may_not_use_is_refused_naming_the_allowed_ones(
    demo: Any, admin: Any, bob: Any, t4: NodePool, restricted: str
) -> None:
    restrict(admin, restricted, demo.node_pool)
    with pytest.raises(DomainError) as info:
        submit_to(bob, demo, [demo.node_pool, t4])
    assert info.value.field == "node_pools"
    assert info.value.message == (
        "Quota 1.1 may not use node pool T4; its workloads may run only in A100-80G."
    )
    assert not Workload.objects.exists()
    assert [p.name for p in submit_to(bob, demo, [demo.node_pool]).node_pools.all()] == ["A100-80G"]


def test_the_form_offers_only_allowed_pools_and_labels_the_quota(
    demo: Any, admin: Any, bob: Any, login: Callable[[Any], Any], t4: NodePool
) -> None:
    url = reverse("jobs:job_submit", args=[WS])
    form = login(bob).get(url).context["form"]
    assert [p.name for p in form.fields["node_pool"].queryset] == ["A100-80G", "T4"]
    restrict(admin, "Quota 1.1", demo.node_pool)
    response = login(bob).get(url)
    assert [p.name for p in response.context["form"].fields["node_pool"].queryset] == ["A100-80G"]
    assert "Quota 1.1 (only in A100-80G)" in response.content.decode()


def test_the_form_shows_the_refusal_on_the_node_pool_field(
    demo: Any, admin: Any, bob: Any, login: Callable[[Any], Any], t4: NodePool
) -> None:
    # Quota 1.2 may run anywhere, so T4 is offered; Quota 1.1 may not use it.
    workspace_quota_bind(workspace=demo.workspaces[WS], quota=demo.quotas["Quota 1.2"])
    resource_usage_rule_set(
        workspace=demo.workspaces[WS], quota=demo.quotas["Quota 1.2"], role=Role.DEVELOPER
    )
    restrict(admin, "Quota 1.1", demo.node_pool)
    response = login(bob).post(reverse("jobs:job_submit", args=[WS]), _job(demo, node_pool=t4.pk))
    assert response.context["form"].errors["node_pool"] == [
        "Quota 1.1 may not use node pool T4; its workloads may run only in A100-80G."
    ]
    assert not Workload.objects.exists()


def test_a_queued_job_outside_its_quotas_new_pools_waits_and_says_why(
    demo: Any, admin: Any, bob: Any, t4: NodePool, tick: Callable[..., None]
) -> None:
    job = submit_to(bob, demo, [t4])
    restrict(admin, "Quota 1", demo.node_pool)
    tick()
    job.refresh_from_db()
    assert job.status == Status.QUEUED and not job.pods.exists()
    assert job.pending_reason == "Quota 1 may not use pool T4; it may run only in A100-80G"
