"""The submit forms: they offer only what the Resource Usage rules allow; refusals name the rule."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from jobs.choices import Kind
from jobs.models import Workload
from workspaces.choices import Role
from workspaces.services import resource_usage_rule_set

pytestmark = pytest.mark.django_db

WS = "workspace_b"


def _job(demo: Any, **changes: Any) -> dict[str, Any]:
    data = {
        "name": "resnet",
        "quota": demo.quotas["Quota 1.1"].pk,
        "node_pool": demo.node_pool.pk,
        "replicas": "2",
        "gpu": "8",
        "cpu": "16",
        "memory": "128",
        "priority": "5",
        "idle_policy": "acceptable",
        "checkpoint_minutes": "10",
        "work_hours": "",
        "fault_tolerance": "on",
        "max_restarts": "2",
        "restart_mode": "async",
        "hang_minutes": "15",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def _cap(demo: Any, *, gpus: int | None = None, priority: int | None = None) -> None:
    resource_usage_rule_set(
        workspace=demo.workspaces[WS],
        quota=demo.quotas["Quota 1.1"],
        role=Role.DEVELOPER,
        max_gpus=gpus * 1000 if gpus is not None else None,
        max_priority=priority,
    )


def test_submit_creates_the_job_in_core_units(demo, login, bob) -> None:
    response = login(bob).post(reverse("jobs:job_submit", args=[WS]), _job(demo))
    assert response.status_code == 302
    assert response["Location"] == reverse("jobs:job_list", args=[WS])
    job = Workload.objects.get(name="resnet")
    assert (job.kind, job.replicas, job.gpu, job.cpu, job.memory) == (
        Kind.TRAINING,
        2,
        8000,
        16000,
        131072,
    )
    assert (job.idle_policy, job.checkpoint_interval, job.restart_mode) == (
        "acceptable",
        600,
        "async",
    )
    assert (job.fault_tolerance, job.max_restarts, job.hang_minutes) == (True, 2, 15)
    assert job.total_work == 16 * 3600
    assert list(job.node_pools.all()) == [demo.node_pool]


def test_a_fraction_of_a_gpu_is_accepted(demo, login, bob) -> None:
    data = _job(demo, replicas="1", gpu="0.5", fault_tolerance=None)
    assert login(bob).post(reverse("jobs:job_submit", args=[WS]), data).status_code == 302
    job = Workload.objects.get(name="resnet")
    assert job.gpu == 500 and job.fault_tolerance is False


def test_a_fraction_above_one_gpu_is_refused_on_the_gpu_field(demo, login, bob) -> None:
    response = login(bob).post(reverse("jobs:job_submit", args=[WS]), _job(demo, gpu="1.5"))
    assert response.status_code == 200
    assert "a fraction is only allowed below one GPU" in response.context["form"].errors["gpu"][0]


def test_form_offers_only_the_quotas_the_rules_allow(demo, login, bob) -> None:
    form = login(bob).get(reverse("jobs:job_submit", args=[WS])).context["form"]
    assert [q.name for q in form.fields["quota"].queryset] == ["Quota 1.1"]
    assert [p.name for p in form.fields["node_pool"].queryset] == ["A100-80G"]


def test_form_shows_the_caps_of_the_rules(demo, login, bob) -> None:
    _cap(demo, gpus=16, priority=6)
    body = login(bob).get(reverse("jobs:job_submit", args=[WS])).content.decode()
    assert "Quota 1.1 (at most 16 GPUs, priority up to 6)" in body
    assert "Your role may use at most 16 GPUs in total." in body
    assert 'max="6"' in body


def test_gpu_over_the_cap_is_refused_naming_the_rule(demo, login, bob) -> None:
    _cap(demo, gpus=8)
    response = login(bob).post(reverse("jobs:job_submit", args=[WS]), _job(demo))
    errors = response.context["form"].errors["gpu"]
    assert errors == [
        "The Resource Usage rule for Quota 1.1 caps your role at 8 GPUs; this asks for 16."
    ]
    assert "The Resource Usage rule for Quota 1.1 caps your role at 8 GPUs" in (
        response.content.decode()
    )
    assert not Workload.objects.exists()


def test_priority_over_the_cap_is_refused_naming_the_rule(demo, login, bob) -> None:
    _cap(demo, priority=4)
    response = login(bob).post(reverse("jobs:job_submit", args=[WS]), _job(demo, priority="7"))
    assert response.context["form"].errors["priority"] == [
        "The Resource Usage rule for Quota 1.1 caps your role at priority 4; this asks for 7."
    ]


def test_a_quota_the_rules_do_not_allow_is_refused(demo, login, bob) -> None:
    data = _job(demo, quota=demo.quotas["Quota 1"].pk)
    response = login(bob).post(reverse("jobs:job_submit", args=[WS]), data)
    assert response.context["form"].errors["quota"] == [
        "Your role may not use that quota in this workspace."
    ]


def test_no_rule_for_the_role_says_so(demo, login, bob) -> None:
    from workspaces.models import ResourceUsageRule

    ResourceUsageRule.objects.filter(workspace__name=WS).delete()
    body = login(bob).get(reverse("jobs:job_submit", args=[WS])).content.decode()
    assert "No Resource Usage rule of workspace_b lets your role use a quota" in body


def test_duplicate_name_is_refused_on_the_name_field(demo, login, bob) -> None:
    client = login(bob)
    client.post(reverse("jobs:job_submit", args=[WS]), _job(demo))
    response = client.post(reverse("jobs:job_submit", args=[WS]), _job(demo))
    assert response.context["form"].errors["name"] == [
        "workspace_b already has a workload named resnet."
    ]


def test_viewer_gets_403_on_the_submit_form(demo, login) -> None:
    from django.contrib.auth import get_user_model

    from workspaces.services import workspace_member_add

    viewer = get_user_model().objects.create_user("vera", password="x")
    workspace_member_add(workspace=demo.workspaces[WS], user=viewer, role=Role.VIEWER)
    client = login(viewer)
    assert client.get(reverse("jobs:job_submit", args=[WS])).status_code == 403
    assert client.post(reverse("jobs:job_submit", args=[WS]), _job(demo)).status_code == 403
    assert (
        "Submit a training job"
        not in client.get(reverse("jobs:job_list", args=[WS])).content.decode()
    )


def test_service_create_checks_its_gpus_at_max_replicas(demo, login, bob) -> None:
    _cap(demo, gpus=8)
    data = {
        "name": "embed",
        "quota": demo.quotas["Quota 1.1"].pk,
        "node_pool": demo.node_pool.pk,
        "replicas": "1",
        "min_replicas": "1",
        "max_replicas": "4",
        "gpu": "4",
        "cpu": "8",
        "memory": "32",
        "priority": "5",
    }
    response = login(bob).post(reverse("jobs:service_create", args=[WS]), data)
    assert "caps your role at 8 GPUs; this asks for 16" in response.context["form"].errors["gpu"][0]
    data["max_replicas"] = "2"
    response = login(bob).post(reverse("jobs:service_create", args=[WS]), data)
    service = Workload.objects.get(name="embed")
    assert response["Location"] == reverse("jobs:service_detail", args=[WS, service.pk])
    assert (service.kind, service.min_replicas, service.max_replicas) == (Kind.INFERENCE, 1, 2)


def test_instance_start_takes_hours_and_refuses_a_short_limit(demo, login, bob) -> None:
    data = {
        "name": "notebook",
        "quota": demo.quotas["Quota 1.1"].pk,
        "node_pool": demo.node_pool.pk,
        "gpu": "1",
        "cpu": "4",
        "memory": "16",
        "max_hours": "0.01",
    }
    response = login(bob).post(reverse("jobs:instance_start", args=[WS]), data)
    assert response.context["form"].errors["max_hours"]
    data["max_hours"] = "2"
    data["idle_stop_minutes"] = "30"
    assert login(bob).post(reverse("jobs:instance_start", args=[WS]), data).status_code == 302
    instance = Workload.objects.get(name="notebook")
    assert (instance.kind, instance.max_duration, instance.idle_stop_minutes) == (
        Kind.INTERACTIVE,
        7200,
        30,
    )


def _instance(demo: Any, **changes: Any) -> dict[str, Any]:
    data = {
        "name": "notebook",
        "quota": demo.quotas["Quota 1.1"].pk,
        "node_pool": demo.node_pool.pk,
        "gpu": "1",
        "cpu": "4",
        "memory": "16",
        "max_hours": "",
    }
    data.update(changes)
    return data


def _limit(demo: Any, *, default: int | None, maximum: int | None) -> None:
    from workspaces.models import Workspace

    Workspace.objects.filter(pk=demo.workspaces[WS].pk).update(
        instance_default_duration=default, instance_max_duration=maximum
    )


def test_instance_form_shows_the_workspace_limits_and_an_empty_duration_takes_the_default(
    demo, login, bob
) -> None:
    _limit(demo, default=2 * 3600, maximum=8 * 3600)
    url = reverse("jobs:instance_start", args=[WS])
    page = login(bob).get(url)
    body = page.content.decode()
    assert (
        '<p class="limits" data-testid="instance-limits">Limit: default 2 h, at most 8 h</p>'
        in body
    )
    assert page.context["form"]["max_hours"].value() is None
    assert "Empty: the workspace&#x27;s default, 2 h." in body
    assert login(bob).post(url, _instance(demo)).status_code == 302
    assert Workload.objects.get(name="notebook").max_duration == 2 * 3600


def test_instance_form_refuses_a_duration_past_the_cap_on_its_field(demo, login, bob) -> None:
    _limit(demo, default=None, maximum=8 * 3600)
    url = reverse("jobs:instance_start", args=[WS])
    page = login(bob).get(url)
    assert "Limit: no default, at most 8 h" in page.content.decode()
    assert page.context["form"]["max_hours"].value() == 4  # the usual 4 h fits under the cap
    response = login(bob).post(url, _instance(demo, max_hours="87600"))
    assert response.status_code == 200
    assert response.context["form"].errors["max_hours"] == [
        "workspace_b caps interactive instances at 8 h; this asks for 87600 h."
    ]
    empty = login(bob).post(url, _instance(demo))
    assert empty.context["form"].errors["max_hours"] == ["Maximum duration (hours) is required."]
    assert not Workload.objects.filter(name="notebook").exists()


def test_instance_form_starts_at_the_cap_when_the_usual_4_h_is_over_it(demo, login, bob) -> None:
    _limit(demo, default=None, maximum=3 * 3600)
    page = login(bob).get(reverse("jobs:instance_start", args=[WS]))
    assert page.context["form"]["max_hours"].value() == 3
    assert "Limit:" in page.content.decode()
