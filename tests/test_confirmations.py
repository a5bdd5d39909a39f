"""Every action that ends work or cuts a guarantee asks first, without JavaScript.

A POST without confirm answers the confirmation page (200) with the effect in numbers and
changes nothing; the page's own fields posted back with confirm=1 apply it. A confirm whose
numbers changed since the page was shown is shown again instead of applied.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from jobs.choices import Status
from jobs.models import ScalingRule, Workload
from jobs.services.scaling import scaling_rule_create, service_scale
from jobs.services.workloads import Shape, instance_start, service_create
from quotas.models import QuotaAudit
from tests.jobs import conftest as control
from tests.quotas.builders import dump, min_gpus
from workspaces.models import Membership, ResourceUsageRule, WorkspaceQuota

pytestmark = pytest.mark.django_db

clock, sim, tick, submit, service = (
    control.clock,
    control.sim,
    control.tick,
    control.submit,
    control.service,
)
WS = "workspace_b"


def _page_fields(response: Any) -> dict[str, str]:
    """What the confirmation page's form posts back (its hidden fields and Confirm)."""
    html = response.content.decode()
    start = html.index('data-testid="confirm"')
    form = html[start : html.index("</form>", start)]
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
    fields.pop("csrfmiddlewaretoken", None)
    return {**fields, "confirm": "1"}


def _asks(response: Any) -> str:
    """The confirmation page's text, after checking it is one."""
    assert response.status_code == 200
    assert "_confirm.html" in [t.name for t in response.templates]
    return re.sub(r"\s+", " ", response.content.decode())


@pytest.fixture
def running(bob: Any, submit: Any, tick: Any) -> Workload:
    """bob's training job resnet: 2 replicas of 8 GPUs, running for 10 minutes."""
    job = submit(bob, "resnet", replicas=2, gpus=8)
    tick(1)
    tick(30)
    tick(600)
    job.refresh_from_db()
    assert job.status == Status.RUNNING
    return job


def test_cancel_job_asks_with_the_replicas_and_work_then_cancels(login, bob, running) -> None:
    url = reverse("jobs:job_cancel", args=[WS, running.pk])
    client = login(bob)
    page = client.post(url)
    text = _asks(page)
    assert "Cancel training job resnet?" in text
    assert "2 running replicas (16 GPUs) stop." in text
    assert re.search(r"It is \d+% done", text)
    running.refresh_from_db()
    assert running.status == Status.RUNNING
    done = client.post(url, _page_fields(page))
    assert done.status_code == 302
    running.refresh_from_db()
    assert running.status == Status.CANCELLED


def test_cancel_job_says_what_the_last_checkpoint_keeps(login, bob, running, tick, clock) -> None:
    tick(1800)  # past the 30-minute checkpoint interval
    running.refresh_from_db()
    assert running.last_checkpoint_at is not None
    done = int(100 * running.progress / running.total_work)
    saved = int(100 * running.checkpoint_progress / running.total_work)
    ago = int((clock.now() - running.last_checkpoint_at).total_seconds() // 60)
    page = login(bob).post(reverse("jobs:job_cancel", args=[WS, running.pk]))
    assert (
        f"It is {done}% done; the last checkpoint ({saved}%) was saved {ago}m ago. "
        "A cancelled job is not resumed."
    ) in _asks(page)


def test_a_stale_cancel_is_shown_again_not_applied(login, bob, submit, tick) -> None:
    job = submit(bob, "late", replicas=1, gpus=8)
    url = reverse("jobs:job_cancel", args=[WS, job.pk])
    client = login(bob)
    page = client.post(url)
    assert "late leaves the queue; it has not started." in _asks(page)
    tick(1)
    tick(30)  # it starts between the page and the click
    again = client.post(url, _page_fields(page))
    text = _asks(again)
    assert "The numbers changed since you looked" in text
    assert "1 running replica (8 GPUs) stops." in text
    job.refresh_from_db()
    assert job.status == Status.RUNNING
    assert client.post(url, _page_fields(again)).status_code == 302
    job.refresh_from_db()
    assert job.status == Status.CANCELLED


def test_stop_instance_asks_with_its_gpus_then_stops(demo, login, bob, clock, tick) -> None:
    instance = instance_start(
        actor=bob,
        workspace=demo.workspaces[WS],
        quota=demo.quotas["Quota 1.1"],
        name="notebook",
        shape=Shape(replicas=1, gpu=500),
        node_pools=[demo.node_pool],
        max_duration=7200,
        now=clock.now(),
    )
    tick(1)
    tick(30)
    url = reverse("jobs:instance_stop", args=[WS, instance.pk])
    client = login(bob)
    page = client.post(url)
    text = _asks(page)
    assert "notebook stops: 0.5 GPUs are freed" in text
    assert "of its 2h 00m limit" in text
    instance.refresh_from_db()
    assert instance.status == Status.RUNNING
    stopped = client.post(url, _page_fields(page))
    # Back on the instance's own page, where it now reads Stopped.
    assert stopped.status_code == 302
    assert stopped["Location"] == reverse("jobs:instance_detail", args=[WS, instance.pk])
    instance.refresh_from_db()
    assert instance.status == Status.STOPPED


def test_scale_service_down_asks_with_the_gpus_it_frees(login, alice, service, clock, tick) -> None:
    service_scale(service=service, replicas=8, now=clock.now(), actor=alice)
    tick(1)
    tick(30)
    url = reverse("jobs:service_scale", args=["workspace_a", service.pk])
    client = login(alice)
    page = client.post(url, {"replicas": "1"})
    text = _asks(page)
    assert "chat-api: 8 → 1 replicas frees 56 GPUs; 7 running replicas of 8 stop." in text
    service.refresh_from_db()
    assert service.replicas == 8
    assert client.post(url, _page_fields(page)).status_code == 302
    service.refresh_from_db()
    assert service.replicas == 1


def test_scale_service_up_applies_at_once(login, alice, service) -> None:
    url = reverse("jobs:service_scale", args=["workspace_a", service.pk])
    assert login(alice).post(url, {"replicas": "3"}).status_code == 302
    service.refresh_from_db()
    assert service.replicas == 3


def test_delete_rule_asks_with_its_next_firing_then_deletes(demo, login, bob, clock) -> None:
    svc = service_create(
        actor=bob,
        workspace=demo.workspaces[WS],
        quota=demo.quotas["Quota 1.1"],
        name="embed-api",
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        min_replicas=1,
        max_replicas=4,
        now=clock.now(),
    )
    rule = scaling_rule_create(
        service=svc,
        name="day",
        cron="0 8 * * *",
        timezone="Asia/Shanghai",
        target_replicas=3,
        now=clock.now(),
    )
    url = reverse("jobs:rule_delete", args=[WS, svc.pk, rule.pk])
    client = login(bob)
    page = client.post(url)
    text = _asks(page)
    assert "It would next set embed-api to 3 replicas at 2026-12-02 08:00 Asia/Shanghai" in text
    assert ScalingRule.objects.filter(pk=rule.pk).exists()
    assert client.post(url, _page_fields(page)).status_code == 302
    assert not ScalingRule.objects.filter(pk=rule.pk).exists()


def test_remove_member_asks_with_the_workloads_that_stay(login, admin, bob, running) -> None:
    url = reverse("workspaces:member_remove", args=[WS, bob.pk])
    client = login(admin)
    page = client.post(url)
    text = _asks(page)
    assert "bob loses the Developer role in workspace_b" in text
    assert "1 active workload of theirs (1 running on 16 GPUs) stays: nothing is cancelled" in text
    assert Membership.objects.filter(workspace__name=WS, user=bob).exists()
    assert client.post(url, _page_fields(page)).status_code == 302
    assert not Membership.objects.filter(workspace__name=WS, user=bob).exists()
    running.refresh_from_db()
    assert running.status == Status.RUNNING  # as the page said


def test_unbind_quota_asks_with_the_rules_and_workloads_then_unbinds(
    demo, login, admin, bob, running, submit
) -> None:
    submit(bob, "waits", replicas=6, gpus=8)
    quota = demo.quotas["Quota 1.1"]
    url = reverse("workspaces:quota_unbind", args=[WS, quota.pk])
    client = login(admin)
    page = client.post(url)
    text = _asks(page)
    assert "workspace_b can no longer submit to Quota 1.1." in text
    assert "2 resource usage rules of workspace_b for Quota 1.1 are deleted." in text
    assert "1 running on 16 GPUs, nothing is stopped, and 1 queued workload may still start." in (
        text
    )
    assert WorkspaceQuota.objects.filter(workspace__name=WS, quota=quota).exists()
    assert client.post(url, _page_fields(page)).status_code == 302
    assert not WorkspaceQuota.objects.filter(workspace__name=WS, quota=quota).exists()
    assert not ResourceUsageRule.objects.filter(workspace__name=WS, quota=quota).exists()


def test_scale_quota_down_asks_even_when_no_job_is_touched(demo, login, admin) -> None:
    quota = demo.quotas["Quota 1.1"]
    url = f"/quotas/{quota.pk}/scale/"
    data = {f"np{demo.node_pool.pk}_min_gpu": "40", "version": "1"}
    client = login(admin)
    before = dump()
    page = client.post(url, data)
    text = _asks(page)
    assert "Quota 1.1: A100-80G GPU min 48 → 40." in text
    assert "No running job is affected" in text
    assert dump() == before
    assert client.post(url, _page_fields(page)).status_code == 302
    assert min_gpus("Quota 1.1") == 40
    assert QuotaAudit.objects.filter(quota=quota, action="scale").count() == 1


def test_scale_quota_down_names_the_jobs_and_gpus_that_leave_quota(
    demo, login, admin, running
) -> None:
    quota = demo.quotas["Quota 1.1"]
    url = f"/quotas/{quota.pk}/scale/"
    page = login(admin).post(url, {f"np{demo.node_pool.pk}_min_gpu": "8", "version": "1"})
    text = _asks(page)
    assert "Quota 1.1: A100-80G GPU min 48 → 8." in text
    assert "1 running job (16 GPUs) becomes Not in Quota: it keeps running" in text
    assert "(reclaim)" not in text


def test_rebalance_asks_with_both_quotas_before_and_after(demo, login, admin) -> None:
    q11, q12 = demo.quotas["Quota 1.1"], demo.quotas["Quota 1.2"]
    url = f"/quotas/{q11.pk}/rebalance/"
    data = {"target": q12.pk, "node_pool": demo.node_pool.pk, "gpu": "8"}
    client = login(admin)
    page = client.post(url, data)
    text = _asks(page)
    assert "Quota 1.1 A100-80G GPU min 48 → 40" in text
    assert "Quota 1.2 A100-80G GPU min 80 → 88" in text
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (48, 80)
    assert client.post(url, _page_fields(page)).status_code == 302
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (40, 88)


def test_scale_form_shows_usage_and_headroom_before_typing(demo, login, admin, running) -> None:
    from quotas.services.quotas import quota_scale
    from tests.quotas.builders import gpus

    quota_scale(actor=admin, quota=demo.quotas["Quota 1.2"], resources={demo.node_pool: gpus(72)})
    response = login(admin).get(f"/quotas/{demo.quotas['Quota 1.1'].pk}/scale/")
    (row,) = response.context["headroom"]
    assert (row.guaranteed, row.in_quota, row.unused) == (48_000, 16_000, 32_000)
    assert (row.parent_free, row.can_rise) == (8_000, 8_000)  # Quota 1: 128 - 48 - 72
    html = response.content.decode()
    assert 'data-testid="headroom"' in html and "Left in Quota 1" in html
    rebalance = login(admin).get(f"/quotas/{demo.quotas['Quota 1.1'].pk}/rebalance/")
    assert [h.unused for h in rebalance.context["headroom"]] == [32_000]
    assert 'data-testid="headroom"' in rebalance.content.decode()


def test_a_quota_cut_that_would_now_touch_a_job_is_shown_again(
    demo, login, admin, bob, submit, tick
) -> None:
    quota = demo.quotas["Quota 1.1"]
    url = f"/quotas/{quota.pk}/scale/"
    client = login(admin)
    page = client.post(url, {f"np{demo.node_pool.pk}_min_gpu": "8", "version": "1"})
    assert "No running job is affected" in _asks(page)
    submit(bob, "resnet", replicas=2, gpus=8)  # starts between the page and the click
    tick(1)
    tick(30)
    again = client.post(url, _page_fields(page))
    text = _asks(again)
    assert "The numbers changed since you looked" in text
    assert "1 running job (16 GPUs) becomes Not in Quota" in text
    assert min_gpus("Quota 1.1") == 48


def test_keep_it_leads_back_to_the_page_that_asked(login, bob, running) -> None:
    url = reverse("jobs:job_cancel", args=[WS, running.pk])
    came_from = "http://testserver/workspaces/workspace_b/jobs/"
    page = login(bob).post(url, HTTP_REFERER=came_from)
    assert page.context["back"] == came_from
    elsewhere = login(bob).post(url, HTTP_REFERER="https://evil.example/")
    assert elsewhere.context["back"] == reverse("jobs:job_detail", args=[WS, running.pk])


def test_removing_yourself_lands_on_your_workspaces(demo, login, admin) -> None:
    from workspaces.choices import Role
    from workspaces.services import workspace_member_add

    workspace_member_add(workspace=demo.workspaces[WS], user=admin, role=Role.ADMIN)
    url = reverse("workspaces:member_remove", args=[WS, admin.pk])
    client = login(admin)
    assert "You are removing yourself" in _asks(client.post(url))
    response = client.post(url, {"confirm": "1"})
    assert response["Location"] == reverse("workspaces:list")


def test_a_rebalance_whose_amounts_changed_meanwhile_is_shown_again(demo, login, admin) -> None:
    from quotas.services.quotas import quota_rebalance

    q11, q12 = demo.quotas["Quota 1.1"], demo.quotas["Quota 1.2"]
    url = f"/quotas/{q11.pk}/rebalance/"
    client = login(admin)
    page = client.post(url, {"target": q12.pk, "node_pool": demo.node_pool.pk, "gpu": "8"})
    assert "Quota 1.1 A100-80G GPU min 48 → 40" in _asks(page)
    quota_rebalance(actor=admin, source=q11, target=q12, node_pool=demo.node_pool, gpu=8000)
    again = client.post(url, _page_fields(page))
    text = _asks(again)
    assert "The numbers changed since you looked" in text
    assert "Quota 1.1 A100-80G GPU min 40 → 32" in text
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (40, 88)
