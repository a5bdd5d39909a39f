"""Usage where decisions are made: the quota tree's usage columns, the Add forms' headroom,
the members' read-only quota overview (and who may open it), and the quota settings form."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.models import NodePool
from console import clock
from console.demo import Demo
from jobs.choices import EventKind, Kind, Status
from jobs.models import Workload, WorkloadEvent
from quotas.amounts import Amounts
from quotas.models import Quota, QuotaAudit
from quotas.services.quotas import quota_scale, quota_update
from tests.dashboard.factories import T0, pod_on, running_workload
from tests.quotas.builders import add_t4, dump, gpus

pytestmark = pytest.mark.django_db


@pytest.fixture
def frozen() -> Iterator[clock.ManualClock]:
    """The cluster clock stopped at T0 + 10 h."""
    manual = clock.ManualClock(T0 + timedelta(hours=10))
    previous = clock.set_clock(manual)
    yield manual
    clock.set_clock(previous)


def _node(demo: Demo, i: int = 0) -> Any:
    return demo.node_pool.nodes.order_by("name")[i]


def waiting_workload(
    demo: Demo,
    *,
    name: str,
    gpu: int,
    replicas: int = 1,
    quota: str = "Quota 1.1",
    workspace: str = "workspace_b",
    pools: list[NodePool] | None = None,
    reason: str = "",
) -> Workload:
    """A queued training job (`gpu` milli-GPU a replica) that accepts `pools` (none: any)."""
    owner = get_user_model().objects.get(username="bob")
    w = Workload.objects.create(
        workspace=demo.workspaces[workspace],
        quota=demo.quotas[quota],
        owner=owner,
        name=name,
        kind=Kind.TRAINING,
        status=Status.QUEUED,
        gpu=gpu,
        replicas=replicas,
        pending_reason=reason,
        submitted_at=T0,
    )
    if pools:
        w.node_pools.set(pools)
    return w


@pytest.fixture
def busy(demo: Demo) -> Demo:
    """Quota 1.1 runs 16 GPUs In Quota and borrows 8; 24 GPUs wait on A100-80G, 4 on any pool;
    Quota 1.2 runs 8 In Quota."""
    in_quota = running_workload(demo, name="in-quota", gpu=8000)
    in_quota.in_quota = True
    in_quota.save()
    pod_on(in_quota, _node(demo, 0), list(range(8)), index=0)
    pod_on(in_quota, _node(demo, 1), list(range(8)), index=1)
    borrowed = running_workload(demo, name="borrowed", gpu=8000)
    borrowed.in_quota = False
    borrowed.save()
    pod_on(borrowed, _node(demo, 2), list(range(8)), borrowed=True)
    other = running_workload(demo, name="other-team", gpu=8000, quota="Quota 1.2")
    pod_on(other, _node(demo, 3), list(range(8)))
    waiting_workload(
        demo,
        name="waits",
        gpu=8000,
        replicas=3,
        pools=[demo.node_pool],
        reason="Quota 1.1 has 0 GPUs free of its 48 guaranteed.",
    )
    waiting_workload(demo, name="waits-anywhere", gpu=4000, reason="No node has 4 GPUs free.")
    return demo


def _usage(html: str, quota: str, pool: str) -> dict[str, str]:
    """The In Quota, borrowed and pending figures of a tree row's pool line."""
    row = html.split(f'<tr data-quota="{quota}"', 1)[1].split("</tr>", 1)[0]
    line = row.split(f'class="pool-line usage-line" data-pool="{pool}"', 1)[1].split("</div>")[0]
    return dict(re.findall(r'data-usage="([a-z-]+)"[^>]*>([^<]+)<', line))


# --- the tree ----------------------------------------------------------------------------------


def test_tree_shows_in_quota_borrowed_and_pending_per_quota_and_pool(
    busy: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    html = login(admin).get("/quotas/").content.decode()
    assert _usage(html, "Quota 1.1", "A100-80G") == {
        "in-quota": "16",
        "borrowed": "8",
        "pending": "24",
    }
    assert _usage(html, "Quota 1.1", "any") == {"pending": "4"}
    assert _usage(html, "Quota 1.2", "A100-80G") == {
        "in-quota": "8",
        "borrowed": "0",
        "pending": "0",
    }
    # A parent counts its children's jobs, as the scheduler does.
    assert _usage(html, "Quota 1", "A100-80G") == {
        "in-quota": "24",
        "borrowed": "8",
        "pending": "24",
    }
    assert '<span data-bound="min">48</span> / <span data-bound="max">∞</span>' in html


def test_tree_hides_cpu_and_memory_until_a_quota_sets_them(
    demo: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    client = login(admin)
    html = client.get("/quotas/").content.decode()
    assert 'data-column="cpu"' not in html and 'data-column="memory"' not in html
    assert "CPU cores" not in html.split('data-testid="quota-tree"', 1)[1]

    quota_scale(
        actor=admin,
        quota=demo.quotas["Quota 1.2"],
        resources={demo.node_pool: Amounts(min_gpu=80_000, max_cpu=64_000)},
    )
    html = client.get("/quotas/").content.decode()
    assert 'data-column="cpu"' in html and 'data-column="memory"' not in html
    assert 'data-resource="cpu" data-pool="A100-80G">0 / 64<' in html


def test_tree_row_actions_sit_in_a_menu_that_works_without_javascript(
    demo: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    html = login(admin).get("/quotas/").content.decode()
    row = html.split('<tr data-quota="Quota 1.1"', 1)[1].split("</tr>", 1)[0]
    menu = row.split('<details class="row-menu">', 1)[1].split("</details>", 1)[0]
    for label in ("Overview", "Settings", "Scale", "Rebalance", "New Child-level", "Delete"):
        assert f">{label}" in menu
    assert "<script" not in html


def test_tree_makes_the_same_number_of_queries_for_few_or_many_jobs(
    busy: Demo, admin: Any, login: Callable[[Any], Any], django_assert_max_num_queries: Any
) -> None:
    client = login(admin)
    with CaptureQueriesContext(connection) as few:
        client.get("/quotas/")
    for i in range(30):
        w = running_workload(busy, name=f"more-{i}", gpu=1000, quota="Quota 1.2")
        pod_on(w, _node(busy, 4 + i % 8), [i % 8], borrowed=i % 2 == 0)
        waiting_workload(busy, name=f"queued-{i}", gpu=1000, pools=[busy.node_pool])
    with django_assert_max_num_queries(len(few)):
        client.get("/quotas/")


# --- the Add forms' headroom -------------------------------------------------------------------


def _headroom(html: str, pool: str) -> dict[str, str]:
    row = html.split('data-testid="add-headroom"', 1)[1].split(f'<tr data-pool="{pool}">', 1)[1]
    row = row.split("</tr>", 1)[0]
    cells = dict(re.findall(r'data-field="([a-z-]+)">(.*?)</td>', row, re.S))
    return {k: re.sub(r"<[^>]+>", " ", v).split()[0] for k, v in cells.items()}


def test_add_form_shows_what_the_pool_has_left_before_typing(
    busy: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    html = login(admin).get("/quotas/new/").content.decode()
    assert _headroom(html, "A100-80G") == {
        "guaranteed": "128",
        "given": "128",
        "room": "0",
        "in-use": "24",
    }


def test_child_form_shows_what_the_parent_has_left_and_runs(
    busy: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    client = login(admin)
    html = client.get(f"/quotas/{busy.quotas['Quota 1'].pk}/children/new/").content.decode()
    assert "What Quota 1 has left" in html
    assert _headroom(html, "A100-80G")["room"] == "0"
    html = client.get(f"/quotas/{busy.quotas['Quota 1.1'].pk}/children/new/").content.decode()
    cells = _headroom(html, "A100-80G")
    assert cells == {"guaranteed": "48", "given": "0", "room": "48", "in-use": "16"}
    assert '<span data-usage="borrowed">8</span>' in html


# --- the members' overview ---------------------------------------------------------------------


def _member_url(demo: Demo, workspace: str, quota: str) -> str:
    return f"/workspaces/{workspace}/quotas/{demo.quotas[quota].pk}/"


# (who, workspace, quota, status): bound member, unbound quota, another team, admin
MATRIX = [
    ("bob", "workspace_b", "Quota 1.1", 200),
    ("bob", "workspace_b", "Quota 1.2", 404),  # a quota not bound to his workspace
    ("bob", "workspace_c", "Quota 1.2", 404),  # another team's workspace
    ("carol", "workspace_b", "Quota 1.1", 404),
    ("alice", "workspace_a", "Quota 1", 200),
    ("alice", "workspace_a", "Quota 1.1", 404),  # a child of her quota, bound elsewhere
    ("admin", "workspace_b", "Quota 1.1", 200),
    ("admin", "workspace_c", "Quota 1.2", 200),
    ("admin", "workspace_b", "Quota 1.2", 404),  # not bound there: the admin's page is /quotas/
    (None, "workspace_b", "Quota 1.1", 302),
]


@pytest.mark.parametrize(
    ("username", "workspace", "quota", "status"),
    MATRIX,
    ids=[f"{u or 'anonymous'}-{w}-{q}" for u, w, q, _ in MATRIX],
)
def test_member_quota_overview_permission_matrix(
    demo: Demo,
    login: Callable[[Any], Any],
    username: str | None,
    workspace: str,
    quota: str,
    status: int,
) -> None:
    user = get_user_model().objects.get(username=username) if username else None
    url = _member_url(demo, workspace, quota)
    response = login(user).get(url)
    assert response.status_code == status
    if status == 302:
        assert response["Location"] == f"/login/?next={url}"


def test_a_missing_quota_answers_404_in_the_members_overview(
    demo: Demo, bob: Any, login: Callable[[Any], Any]
) -> None:
    assert login(bob).get("/workspaces/workspace_b/quotas/9999/").status_code == 404


def test_workspace_page_links_each_bound_quota_to_its_overview(
    demo: Demo, bob: Any, login: Callable[[Any], Any]
) -> None:
    html = login(bob).get("/workspaces/workspace_b/").content.decode()
    assert f'href="{_member_url(demo, "workspace_b", "Quota 1.1")}"' in html


def _child_preemption(demo: Demo, at: Any, victims: list[Workload]) -> None:
    """Alice's inference service in Quota 1 preempts `victims` at `at`, as the cycle records."""
    owner = get_user_model().objects.get(username="alice")
    service, _ = Workload.objects.get_or_create(
        workspace=demo.workspaces["workspace_a"],
        name="chat-api",
        defaults={
            "quota": demo.quotas["Quota 1"],
            "owner": owner,
            "kind": Kind.INFERENCE,
            "status": Status.RUNNING,
            "gpu": 8000,
            "replicas": 3,
            "submitted_at": T0,
        },
    )
    for v in victims:
        WorkloadEvent.objects.create(
            workload=v,
            at=at,
            kind=EventKind.PREEMPTED,
            message="Preempted by chat-api: child-level preemption by the parent Quota 1.",
            data={"by": "chat-api", "reason": "child_preemption"},
        )
        WorkloadEvent.objects.create(
            workload=service,
            at=at,
            kind=EventKind.PREEMPTOR,
            message=f"Preempted {v.name} to make room.",
            data={"victim": v.name, "reason": "child_preemption"},
        )


def test_member_overview_shows_guarantee_usage_waits_and_preemptions(
    busy: Demo, bob: Any, login: Callable[[Any], Any], frozen: clock.ManualClock
) -> None:
    eight = T0 + timedelta(hours=8)
    victims = [
        waiting_workload(busy, name=f"victim-{i}", gpu=8000, pools=[busy.node_pool])
        for i in range(3)
    ]
    _child_preemption(busy, eight, victims)
    # Long ago: outside the overview's window.
    old = waiting_workload(busy, name="old-victim", gpu=8000, pools=[busy.node_pool])
    _child_preemption_old = eight - timedelta(days=3)
    WorkloadEvent.objects.create(
        workload=old,
        at=_child_preemption_old,
        kind=EventKind.PREEMPTED,
        message="Preempted long ago.",
        data={"by": "x", "reason": "priority"},
    )
    response = login(bob).get(_member_url(busy, "workspace_b", "Quota 1.1"))
    html = response.content.decode()
    summary = html.split('data-testid="summary"', 1)[1].split("</p>", 1)[0]
    assert re.findall(r'data-field="([a-z-]+)">([^<]+)<', summary) == [
        ("guaranteed", "48"),
        ("in-quota", "16"),
        ("borrowed", "8"),
        ("pending", "60"),  # 24 + 4 + the three requeued victims' 24 + the old victim's 8
    ]
    row = html.split('<tr data-pool="A100-80G">', 1)[1].split("</tr>", 1)[0]
    assert 'data-field="mine-in-quota">16<' in row and 'data-field="mine-borrowed">8<' in row
    waits = html.split('data-testid="why-waiting"', 1)[1]
    assert "Quota 1.1 has 0 GPUs free of its 48 guaranteed." in waits
    assert "No node has 4 GPUs free." in waits
    preemptions = waits.split('data-testid="preemptions"', 1)[1].split("</ul>", 1)[0]
    assert (
        "Quota 1&#x27;s inference service took 24 GPUs back by child-level preemption at "
        '<time datetime="2026-12-01T08:00:00+00:00">2026-12-01 08:00 UTC</time>'
    ) in preemptions
    assert "3 jobs, all of this workspace" in preemptions
    assert "long ago" not in preemptions and preemptions.count("<li") == 1


def test_member_overview_shows_no_other_workspaces_job_names(
    busy: Demo, bob: Any, login: Callable[[Any], Any], frozen: clock.ManualClock
) -> None:
    html = login(bob).get(_member_url(busy, "workspace_b", "Quota 1.1")).content.decode()
    assert "other-team" not in html
    # carol's waiting job in her own quota is not bob's to read about
    waiting_workload(
        busy, name="carols", gpu=1000, quota="Quota 1.2", workspace="workspace_c", reason="Secret."
    )
    assert (
        "Secret."
        not in login(bob).get(_member_url(busy, "workspace_b", "Quota 1.1")).content.decode()
    )


def test_member_overview_makes_the_same_number_of_queries_for_few_or_many_jobs(
    busy: Demo,
    bob: Any,
    login: Callable[[Any], Any],
    frozen: clock.ManualClock,
    django_assert_max_num_queries: Any,
) -> None:
    client = login(bob)
    url = _member_url(busy, "workspace_b", "Quota 1.1")
    _child_preemption(busy, T0 + timedelta(hours=8), [waiting_workload(busy, name="v", gpu=1)])
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    victims = [waiting_workload(busy, name=f"v-{i}", gpu=1000) for i in range(20)]
    _child_preemption(busy, T0 + timedelta(hours=9), victims)
    with django_assert_max_num_queries(len(few)):
        client.get(url)


# --- the settings form -------------------------------------------------------------------------


def _settings(quota: Quota, **changes: Any) -> dict[str, Any]:
    """The settings form's POST body for `quota` as stored, with `changes`."""
    quota.refresh_from_db()
    data: dict[str, Any] = {
        "name": quota.name,
        "over_quota_weight": "" if quota.over_quota_weight is None else quota.over_quota_weight,
        "queue_strategy": quota.queue_strategy,
        "version": quota.version,
        "allowed_node_pools": [np.pk for np in quota.allowed_node_pools.all()],
    }
    if quota.lend_idle:
        data["lend_idle"] = "on"
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


SETTINGS_PAGES = [("admin", 200), ("bob", 404), ("alice", 404), (None, 302)]


@pytest.mark.parametrize(
    ("username", "status"), SETTINGS_PAGES, ids=[str(u) for u, _ in SETTINGS_PAGES]
)
def test_only_platform_admins_open_the_settings_form(
    demo: Demo, login: Callable[[Any], Any], username: str | None, status: int
) -> None:
    user = get_user_model().objects.get(username=username) if username else None
    client = login(user)
    url = f"/quotas/{demo.quotas['Quota 1.1'].pk}/settings/"
    before = dump()
    assert client.get(url).status_code == status
    post = client.post(url, _settings(demo.quotas["Quota 1.1"], name="Hijacked"))
    assert post.status_code == (302 if username is None else status if status != 200 else 302)
    if username != "admin":
        assert dump() == before


def test_settings_form_saves_every_setting_through_the_service(
    demo: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    quota = demo.quotas["Quota 1.1"]
    t4 = add_t4(demo)
    client = login(admin)
    page = client.get(f"/quotas/{quota.pk}/settings/").content.decode()
    assert 'name="version" value="1"' in page and 'value="Quota 1.1"' in page
    response = client.post(
        f"/quotas/{quota.pk}/settings/",
        _settings(
            quota,
            name="Team B",
            over_quota_weight="2.5",
            lend_idle=None,
            queue_strategy="fifo",
            allowed_node_pools=[demo.node_pool.pk],
        ),
    )
    assert response.status_code == 302 and response["Location"] == f"/quotas/{quota.pk}/"
    quota.refresh_from_db()
    assert (quota.name, quota.over_quota_weight, quota.lend_idle, quota.queue_strategy) == (
        "Team B",
        2.5,
        False,
        "fifo",
    )
    assert list(quota.allowed_node_pools.all()) == [demo.node_pool] and t4 is not None
    assert quota.version == 2
    audit = QuotaAudit.objects.filter(quota=quota).first()
    assert audit is not None and audit.action == "update" and audit.actor == admin
    # Empty weight goes back to proportional to min.
    client.post(f"/quotas/{quota.pk}/settings/", _settings(quota, over_quota_weight=""))
    quota.refresh_from_db()
    assert quota.over_quota_weight is None and quota.version == 3


def test_settings_form_with_nothing_changed_writes_nothing(
    demo: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    quota = demo.quotas["Quota 1.1"]
    before = dump()
    response = login(admin).post(f"/quotas/{quota.pk}/settings/", _settings(quota), follow=True)
    assert "Nothing changed in Quota 1.1." in response.content.decode()
    assert dump() == before


def test_settings_form_refuses_a_stale_version_and_writes_nothing(
    demo: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    quota = demo.quotas["Quota 1.1"]
    loaded = _settings(quota, name="Team B")  # the page as loaded at version 1
    quota_update(actor=admin, quota=quota, lend_idle=False)  # someone else saves: version 2
    before = dump()
    response = login(admin).post(f"/quotas/{quota.pk}/settings/", loaded)
    assert response.status_code == 200
    assert dump() == before
    errors = response.content.decode().split('data-testid="form-errors"', 1)[1].split("</div>")[0]
    assert (
        "Quota 1.1 is at version 2, not 1: it changed since you loaded it. Nothing was saved. "
        "Reload the page to see its settings now, then make your change again."
    ) in errors
    assert f'href="/quotas/{quota.pk}/settings/">Reload</a>' in errors


@pytest.mark.parametrize(
    ("changes", "label", "message"),
    [
        (
            {"over_quota_weight": "-1"},
            "Over-quota weight",
            "Over-quota weight must be above 0, not -1; leave it empty for a share "
            "proportional to min.",
        ),
        ({"over_quota_weight": "lots"}, "Over-quota weight", "Enter a number."),
        ({"name": "Quota 1.2"}, "Name", "A quota named Quota 1.2 already exists."),
        ({"name": ""}, "Name", "Give the quota a name."),
        ({"queue_strategy": "random"}, "Queue strategy", "Choose a queue strategy from the list."),
    ],
    ids=["weight-negative", "weight-not-a-number", "name-taken", "name-empty", "strategy"],
)
def test_settings_form_names_the_field_of_bad_input(
    demo: Demo,
    admin: Any,
    login: Callable[[Any], Any],
    changes: dict[str, Any],
    label: str,
    message: str,
) -> None:
    quota = demo.quotas["Quota 1.1"]
    before = dump()
    response = login(admin).post(f"/quotas/{quota.pk}/settings/", _settings(quota, **changes))
    assert response.status_code == 200
    assert dump() == before
    errors = response.content.decode().split('data-testid="form-errors"', 1)[1].split("</div>")[0]
    assert f"<li><strong>{label}</strong>: {message}</li>" in errors.replace("&#x27;", "'")


def test_settings_form_writes_nothing_when_one_setting_is_refused(
    demo: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    """A rename with a node-pool restriction the tree refuses: neither is saved."""
    quota = demo.quotas["Quota 1.1"]
    t4 = add_t4(demo)
    before = dump()
    response = login(admin).post(
        f"/quotas/{quota.pk}/settings/",
        _settings(quota, name="Team B", allowed_node_pools=[t4.pk]),
    )
    assert response.status_code == 200
    assert dump() == before
    errors = response.content.decode().split('data-testid="form-errors"', 1)[1].split("</div>")[0]
    assert "<strong>Allowed node pools</strong>: " in errors
    assert "guarantees 48 GPUs on A100-80G but may run only in T4" in errors


def test_overview_links_to_the_settings_form(
    demo: Demo, admin: Any, login: Callable[[Any], Any]
) -> None:
    quota = demo.quotas["Quota 1.1"]
    html = login(admin).get(f"/quotas/{quota.pk}/").content.decode()
    assert f'href="/quotas/{quota.pk}/settings/"' in html
    assert gpus(1) == Amounts(min_gpu=1000)
