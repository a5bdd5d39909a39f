"""The Django admin: every model a platform admin may need lists for a superuser, read-only."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib import admin
from django.db.models import Model
from django.urls import reverse

from cluster.models import Node, NodePool, ResourcePool
from console.admin import ReadOnlyAdmin
from console.demo import Demo
from jobs.choices import EventKind, Kind, PodStatus, Status
from jobs.models import ControlState, Pod, ScalingRule, UsageSample, Workload, WorkloadEvent
from quotas.models import Quota, QuotaAudit
from workspaces.models import Membership, ResourceUsageRule, Workspace, WorkspaceQuota

MODELS: list[type[Model]] = [
    ResourcePool,
    NodePool,
    Node,
    Quota,
    QuotaAudit,
    Workspace,
    Membership,
    WorkspaceQuota,
    ResourceUsageRule,
    Workload,
    Pod,
    WorkloadEvent,
    ScalingRule,
    UsageSample,
    ControlState,
]
IDS = [m.__name__ for m in MODELS]


def _url(model: type[Model], view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def rows(demo: Demo, bob: Any) -> Demo:
    """The demo plus one row of each model the control loop writes."""
    now = datetime(2026, 12, 1, 8, tzinfo=UTC)
    quota = demo.quotas["Quota 1.1"]
    job = Workload.objects.create(
        workspace=demo.workspaces["workspace_b"],
        quota=quota,
        owner=bob,
        name="train",
        kind=Kind.TRAINING,
        status=Status.RUNNING,
        in_quota=True,
        gpu=1000,
        submitted_at=now,
    )
    node = demo.node_pool.nodes.first()
    Pod.objects.create(workload=job, index=0, node=node, status=PodStatus.RUNNING, created_at=now)
    WorkloadEvent.objects.create(
        workload=job, at=now, kind=EventKind.SUBMITTED, message="Submitted"
    )
    ScalingRule.objects.create(
        service=job, name="day", cron="0 8 * * *", target_replicas=1, created_at=now
    )
    UsageSample.objects.create(at=now, quota=quota, gpu_in_quota=1000)
    ControlState.objects.create(sim_now=now, cycles=1)
    return demo


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_changelist_renders_for_a_superuser(
    model: type[Model], rows: Demo, admin: Any, login: Any
) -> None:
    client = login(admin)
    response = client.get(_url(model, "changelist"))
    assert response.status_code == 200
    assert client.get(_url(model, "changelist"), {"q": "a"}).status_code == 200
    first = model._default_manager.first()
    if first is not None:
        assert client.get(_url(model, "change", first.pk)).status_code == 200


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_the_console_owns_the_writes_so_the_admin_refuses_edits(
    model: type[Model], rows: Demo, admin: Any, login: Any
) -> None:
    assert isinstance(admin_site_entry(model), ReadOnlyAdmin)
    client = login(admin)
    assert client.get(_url(model, "add")).status_code == 403
    first = model._default_manager.first()
    if first is not None:
        before = model._default_manager.count()
        assert client.post(_url(model, "change", first.pk), {}).status_code == 403
        assert client.post(_url(model, "delete", first.pk), {"post": "yes"}).status_code == 403
        assert model._default_manager.count() == before
    changelist = client.get(_url(model, "changelist")).content.decode()
    assert 'value="delete_selected"' not in changelist


def admin_site_entry(model: type[Model]) -> Any:
    return admin.site._registry[model]


def test_every_model_of_the_apps_is_registered() -> None:
    from django.apps import apps

    ours = {
        m
        for label in ("cluster", "quotas", "workspaces", "jobs")
        for m in apps.get_app_config(label).get_models()
    }
    skipped = {m.__name__ for m in ours - set(admin.site._registry)}
    # QuotaResource shows under its quota; WriteLock is the cycle's lock row, nothing to read;
    # ClusterInstance is the install's one id row, fixed once chosen (the pods' owner label).
    assert skipped == {"ClusterInstance", "QuotaResource", "WriteLock"}


def test_a_quota_shows_its_min_and_max_per_node_pool(rows: Demo, admin: Any, login: Any) -> None:
    quota = rows.quotas["Quota 1"]
    body = login(admin).get(_url(Quota, "change", quota.pk)).content.decode()
    assert "Quota resources" in body and rows.node_pool.name in body


def test_members_do_not_reach_the_admin(bob: Any, login: Any) -> None:
    response = login(bob).get(_url(Workload, "changelist"))
    assert response.status_code == 302 and "/login/" in response["Location"]
