"""Workload pages through the Django test client: who may see what, lists, live fragments."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobs.choices import EventKind, Kind, PodStatus, Status
from jobs.models import Pod, ScalingRule, Workload
from jobs.services.scaling import scaling_rule_create, service_scale
from jobs.services.workloads import Shape, instance_start, service_create
from workspaces.choices import Role
from workspaces.services import workspace_member_add

pytestmark = pytest.mark.django_db

WS = "workspace_b"


@pytest.fixture
def objects(demo: Any, bob: Any, submit: Any, clock: Any) -> dict[str, Any]:
    """A job, a service with a rule and an instance in bob's workspace."""
    ws = demo.workspaces[WS]
    quota = demo.quotas["Quota 1.1"]
    job = submit(bob, "resnet", replicas=1, gpus=8)
    svc = service_create(
        actor=bob,
        workspace=ws,
        quota=quota,
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
    instance = instance_start(
        actor=bob,
        workspace=ws,
        quota=quota,
        name="notebook",
        shape=Shape(replicas=1, gpu=500),
        node_pools=[demo.node_pool],
        max_duration=7200,
        now=clock.now(),
    )
    return {"job": job, "service": svc, "rule": rule, "instance": instance}


GET_PAGES = [
    ("jobs:job_list", ()),
    ("jobs:job_submit", ()),
    ("jobs:job_detail", ("job",)),
    ("jobs:job_live", ("job",)),
    ("jobs:job_row", ("job",)),
    ("jobs:service_list", ()),
    ("jobs:service_create", ()),
    ("jobs:service_detail", ("service",)),
    ("jobs:service_live", ("service",)),
    ("jobs:rule_update", ("service", "rule")),
    ("jobs:instance_list", ()),
    ("jobs:instance_start", ()),
]
POSTS = [
    ("jobs:job_cancel", ("job",), {"confirm": "1"}),
    ("jobs:service_scale", ("service",), {"replicas": "2"}),
    (
        "jobs:rule_create",
        ("service",),
        {"name": "night", "cron": "0 22 * * *", "timezone": "UTC", "target_replicas": "1"},
    ),
    ("jobs:rule_delete", ("service", "rule"), {"confirm": "1"}),
    ("jobs:instance_stop", ("instance",), {"confirm": "1"}),
]


def _url(name: str, keys: tuple[str, ...], objects: dict[str, Any]) -> str:
    return reverse(name, args=[WS, *(objects[k].pk for k in keys)])


@pytest.mark.parametrize(("name", "keys"), GET_PAGES, ids=[p[0] for p in GET_PAGES])
def test_member_sees_each_page(name, keys, objects, login, bob) -> None:
    assert login(bob).get(_url(name, keys, objects)).status_code == 200


@pytest.mark.parametrize(("name", "keys"), GET_PAGES, ids=[p[0] for p in GET_PAGES])
def test_outsider_gets_404_on_each_page(name, keys, objects, login, carol) -> None:
    assert login(carol).get(_url(name, keys, objects)).status_code == 404


@pytest.mark.parametrize(("name", "keys"), GET_PAGES, ids=[p[0] for p in GET_PAGES])
def test_anonymous_is_sent_to_login_from_each_page(name, keys, objects, login) -> None:
    response = login(None).get(_url(name, keys, objects))
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize(("name", "keys", "data"), POSTS, ids=[p[0] for p in POSTS])
def test_outsider_gets_404_on_each_action(name, keys, data, objects, login, carol) -> None:
    assert login(carol).post(_url(name, keys, objects), data).status_code == 404


@pytest.mark.parametrize(("name", "keys", "data"), POSTS, ids=[p[0] for p in POSTS])
def test_anonymous_is_sent_to_login_from_each_action(name, keys, data, objects, login) -> None:
    response = login(None).post(_url(name, keys, objects), data)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize(("name", "keys", "data"), POSTS, ids=[p[0] for p in POSTS])
def test_viewer_may_look_but_gets_403_on_each_action(
    name, keys, data, objects, login, demo
) -> None:
    viewer = get_user_model().objects.create_user("vera", password="x")
    workspace_member_add(workspace=demo.workspaces[WS], user=viewer, role=Role.VIEWER)
    client = login(viewer)
    assert client.get(reverse("jobs:job_list", args=[WS])).status_code == 200
    assert client.post(_url(name, keys, objects), data).status_code == 403


@pytest.mark.parametrize(("name", "keys", "data"), POSTS, ids=[p[0] for p in POSTS])
def test_member_actions_redirect_and_take_effect(name, keys, data, objects, login, bob) -> None:
    response = login(bob).post(_url(name, keys, objects), data)
    assert response.status_code == 302
    objects["job"].refresh_from_db()
    objects["service"].refresh_from_db()
    objects["instance"].refresh_from_db()
    rules = set(ScalingRule.objects.values_list("name", flat=True))
    outcome = {
        "jobs:job_cancel": objects["job"].status == Status.CANCELLED,
        "jobs:service_scale": objects["service"].replicas == 2,
        "jobs:rule_create": rules == {"day", "night"},
        "jobs:rule_delete": rules == set(),
        "jobs:instance_stop": objects["instance"].status == Status.STOPPED,
    }
    assert outcome[name]


def test_a_job_of_another_workspace_is_404_even_under_my_workspace(
    objects, login, alice, submit
) -> None:
    theirs = submit(alice, "alice-job")
    url = reverse("jobs:job_detail", args=[WS, theirs.pk])
    assert login(alice).get(url).status_code == 404  # alice is not in workspace_b
    client = login(objects["job"].owner)
    assert client.get(url).status_code == 404  # bob: not a job of workspace_b
    wrong_kind = reverse("jobs:job_detail", args=[WS, objects["service"].pk])
    assert client.get(wrong_kind).status_code == 404


def test_tabs_link_the_workspace_pages(objects, login, bob) -> None:
    body = login(bob).get(reverse("jobs:job_list", args=[WS])).content.decode()
    for name in ("jobs:job_list", "jobs:service_list", "jobs:instance_list"):
        assert f'href="{reverse(name, args=[WS])}"' in body
    assert 'aria-current="page">Jobs</a>' in body


# Jobs list ------------------------------------------------------------------------------------


def test_list_shows_in_quota_and_not_in_quota(bob, submit, tick, login, service) -> None:
    submit(bob, "own", replicas=6)
    tick(1)
    submit(bob, "extra", replicas=1, idle_policy="acceptable")
    submit(bob, "waiting", replicas=1)
    tick(1)
    tick(30)
    body = login(bob).get(reverse("jobs:job_list", args=[WS])).content.decode()
    rows = {name: _row(body, name) for name in ("own", "extra", "waiting")}
    assert "In Quota" in rows["own"] and "1 Running" not in rows["own"]
    assert "6 Running" in rows["own"]
    assert "Not in Quota" in rows["extra"]
    assert "Queued" in rows["waiting"] and "In Quota" not in rows["waiting"]


def _row(body: str, name: str) -> str:
    start = body.index(f'data-name="{name}"')
    return body[start : body.index("</tr>", start)]


def test_list_filters_by_status_owner_and_quota(bob, submit, tick, login, demo) -> None:
    submit(bob, "a", replicas=6)
    tick(1)
    submit(bob, "b", replicas=1, idle_policy="acceptable")
    submit(bob, "c", replicas=1)
    tick(1)
    client = login(bob)
    url = reverse("jobs:job_list", args=[WS])

    def names(**params: str) -> list[str]:
        context = client.get(url, params).context
        return sorted(r.workload.name for r in context["rows"])

    assert names() == ["a", "b", "c"]
    assert names(status="Queued") == ["c"]
    assert names(quota="in") == ["a"]
    assert names(quota="not") == ["b"]
    assert names(owner=str(bob.pk)) == ["a", "b", "c"]
    assert names(owner="999999") == []


def test_list_sorts_by_each_column(bob, submit, login) -> None:
    submit(bob, "small", replicas=1, gpus=1, priority=9)
    submit(bob, "big", replicas=4, gpus=8, priority=1)
    client = login(bob)
    url = reverse("jobs:job_list", args=[WS])

    def order(sort: str) -> list[str]:
        return [r.workload.name for r in client.get(url, {"sort": sort}).context["rows"]]

    assert order("gpus") == ["small", "big"]
    assert order("-gpus") == ["big", "small"]
    assert order("priority") == ["big", "small"]
    assert order("name") == ["big", "small"]
    assert order("age") == ["big", "small"]  # newest first
    assert order("-age") == ["small", "big"]
    assert order("nonsense") == ["big", "small"]


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"status": "Bogus"}, "Status: Select a valid choice. Bogus is not one of"),
        ({"owner": "abc"}, "Owner: Enter a whole number."),
        ({"owner": "9" * 30}, "Owner: Ensure this value is less than or equal to"),
        ({"quota": "maybe"}, "Quota status: Select a valid choice."),
        ({"sort": "nonsense"}, "Sort: Select a valid choice."),
    ],
    ids=["status", "owner-text", "owner-huge", "quota", "sort"],
)
def test_list_reports_a_bad_filter_and_leaves_it_out(
    params: dict[str, str], problem: str, bob, submit, login
) -> None:
    submit(bob, "a", replicas=1)
    response = login(bob).get(reverse("jobs:job_list", args=[WS]), {**params, "page": "x"})
    assert response.status_code == 200
    assert [r.workload.name for r in response.context["rows"]] == ["a"]
    assert any(p.startswith(problem) for p in response.context["filter_problems"])
    assert 'data-testid="filter-problems"' in response.content.decode()


def test_list_paginates_by_50(bob, demo, login, clock) -> None:
    _many(bob, demo, 60, clock)
    client = login(bob)
    url = reverse("jobs:job_list", args=[WS])
    first = client.get(url).context
    assert len(first["rows"]) == 50 and first["pages"] == 2 and first["total"] == 60
    second = client.get(url, {"page": "2"}).context
    assert len(second["rows"]) == 10
    assert client.get(url, {"page": "99"}).context["page"] == 2


def _many(user: Any, demo: Any, count: int, clock: Any) -> None:
    """Rows straight into the database: the list's query count must not depend on them."""
    ws = demo.workspaces[WS]
    now = clock.now()
    jobs = Workload.objects.bulk_create(
        Workload(
            workspace=ws,
            quota=demo.quotas["Quota 1.1"],
            owner=user,
            name=f"bulk-{i:03d}",
            kind=Kind.TRAINING,
            status=Status.RUNNING if i % 2 else Status.QUEUED,
            in_quota=True if i % 2 else None,
            gpu=1000,
            total_work=3600,
            progress=i * 10,
            submitted_at=now,
        )
        for i in range(count)
    )
    node = demo.node_pool.nodes.first()
    Pod.objects.bulk_create(
        Pod(workload=w, index=0, node=node, status=PodStatus.RUNNING, created_at=now)
        for w in jobs
        if w.status == Status.RUNNING
    )


@pytest.mark.parametrize("count", [5, 60])
def test_list_makes_a_constant_number_of_queries(
    count, bob, demo, login, clock, django_assert_max_num_queries
) -> None:
    _many(bob, demo, count, clock)
    client = login(bob)
    url = reverse("jobs:job_list", args=[WS])
    client.get(url)  # warm the session and permission caches alike for both counts
    with django_assert_max_num_queries(15):
        response = client.get(url, {"sort": "progress"})
    assert response.status_code == 200


def test_list_query_count_is_the_same_for_5_and_60_jobs(bob, demo, login, clock) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = login(bob)
    url = reverse("jobs:job_list", args=[WS])

    def queries() -> int:
        client.get(url)
        with CaptureQueriesContext(connection) as captured:
            client.get(url)
        return len(captured)

    _many(bob, demo, 5, clock)
    few = queries()
    Workload.objects.all().delete()
    _many(bob, demo, 60, clock)
    assert queries() == few


# Job detail -----------------------------------------------------------------------------------


def test_detail_shows_pods_timeline_and_why_pending(bob, submit, tick, login) -> None:
    submit(bob, "own", replicas=6)
    waiting = submit(bob, "waiting", replicas=1)
    tick(1)
    waiting.refresh_from_db()
    assert waiting.pending_reason
    body = login(bob).get(reverse("jobs:job_detail", args=[WS, waiting.pk])).content.decode()
    assert "Why is it pending?" in body and waiting.pending_reason in body
    assert 'data-kind="submitted"' in body
    assert ">Cancel</button>" in body


def test_detail_hides_borrowed_nodes_from_members_but_not_admins(
    bob, admin, submit, tick, login, service
) -> None:
    submit(bob, "own", replicas=6)
    tick(1)
    extra = submit(bob, "extra", replicas=1, idle_policy="acceptable")
    tick(1)
    tick(30)
    pod = extra.pods.get()
    assert pod.borrowed
    url = reverse("jobs:job_detail", args=[WS, extra.pk])
    member = login(bob).get(url).content.decode()
    assert "borrowed capacity" in member and f">{pod.node.name}<" not in member
    platform = login(admin).get(url).content.decode()
    assert pod.node.name in platform


def test_detail_timeline_tells_preemption_and_resume(
    bob, submit, tick, login, service, clock
) -> None:
    submit(bob, "own", replicas=6)
    tick(1)
    borrowed = submit(
        bob, "borrowed", replicas=5, idle_policy="acceptable", checkpoint_interval=600
    )
    tick(1)
    tick(30)
    tick(1500)
    service_scale(service=service, replicas=8, now=clock.now(), reason="rule day")
    tick()
    url = reverse("jobs:job_detail", args=[WS, borrowed.pk])
    body = login(bob).get(url).content.decode()
    assert "Not in Quota" in body
    assert "Preempted by chat-api" in body and "Work lost since the last checkpoint" in body
    assert body.count("Resource Preempted</span>") >= 5
    service_scale(service=service, replicas=1, now=clock.now(), reason="rule night")
    tick()
    body = login(bob).get(url).content.decode()
    assert "Resumed from its last checkpoint at" in body
    assert borrowed.events.filter(kind=EventKind.RESUMED).exists()


# Services and instances -----------------------------------------------------------------------


def test_service_page_shows_replicas_and_next_firing_in_the_rule_zone(
    objects, login, bob, tick
) -> None:
    tick(1)
    tick(30)
    url = reverse("jobs:service_detail", args=[WS, objects["service"].pk])
    body = login(bob).get(url).content.decode()
    assert 'data-testid="replicas">1 / 1<' in body
    # 06:00 UTC on 1 December is 14:00 in Shanghai: next 08:00 there is 2 December.
    assert "Wed 2026-12-02 08:00 CST" in body
    listing = login(bob).get(reverse("jobs:service_list", args=[WS])).content.decode()
    assert "1 / 1" in listing


def test_rule_refusal_names_the_bad_field(objects, login, bob) -> None:
    url = reverse("jobs:rule_create", args=[WS, objects["service"].pk])
    data = {"name": "bad", "cron": "0 25 * * *", "timezone": "UTC", "target_replicas": "2"}
    response = login(bob).post(url, data)
    assert response.status_code == 400
    assert response.context["rule_form"].errors["cron"]


def test_scale_out_of_range_is_refused_with_the_range(objects, login, bob) -> None:
    url = reverse("jobs:service_scale", args=[WS, objects["service"].pk])
    response = login(bob).post(url, {"replicas": "9"})
    assert response.status_code == 400
    assert "runs 1-4 replicas; 9 is out of that range" in response.content.decode()


def test_rule_edit_saves_through_the_service(objects, login, bob) -> None:
    rule = objects["rule"]
    url = reverse("jobs:rule_update", args=[WS, objects["service"].pk, rule.pk])
    data = {"name": "day", "cron": "30 9 * * 1-5", "timezone": "UTC", "target_replicas": "4"}
    assert login(bob).post(url, {**data, "enabled": "on"}).status_code == 302
    rule.refresh_from_db()
    assert (rule.cron, rule.target_replicas, rule.timezone) == ("30 9 * * 1-5", 4, "UTC")


def test_instance_list_shows_time_left(objects, login, bob, tick) -> None:
    tick(1)
    tick(600)
    body = login(bob).get(reverse("jobs:instance_list", args=[WS])).content.decode()
    # It counts down in the browser from the machine value: the moment the limit stops it.
    assert re.search(
        r'data-field="time-left"><time class="left" datetime="[^"]+" data-left[^>]*>1h 50m<', body
    )
