"""A quota's tabs: Overview usage, Nodes, Jobs and Monitoring, with real control-loop workloads."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.models import Node
from console.demo import Demo
from jobs.choices import IdlePolicy, Kind, PodStatus, Status
from jobs.models import Pod, UsageSample, Workload
from jobs.services.usage import usage_sample
from tests.jobs import conftest as control

pytestmark = pytest.mark.django_db

# The control-loop fixtures of tests/jobs: a manual clock, the simulated backend, tick, submit.
clock, sim, tick, submit = control.clock, control.sim, control.tick, control.submit

TABS = ["", "nodes/", "jobs/", "monitoring/"]
TAB_IDS = ["overview", "nodes", "jobs", "monitoring"]
USERS = ["alice", "bob", "carol", None]


@pytest.fixture
def bob_jobs(bob: Any, submit: Callable[..., Workload], tick: Callable[..., None]) -> dict:
    """Bob in Quota 1.1 (48 GPUs): 48 In Quota, 40 borrowed, and 8 that wait for quota."""
    own = submit(bob, "own", replicas=6)
    tick(1)
    extra = submit(bob, "extra", replicas=5, idle_policy=IdlePolicy.ACCEPTABLE)
    tick(1)
    waits = submit(bob, "waits", replicas=1)
    tick(30)
    jobs = {w.name: Workload.objects.get(pk=w.pk) for w in (own, extra, waits)}
    assert jobs["own"].status == Status.RUNNING and jobs["own"].in_quota is True
    assert jobs["extra"].status == Status.RUNNING and jobs["extra"].in_quota is False
    assert jobs["waits"].status == Status.QUEUED
    return jobs


def _url(demo: Demo, name: str, tab: str = "") -> str:
    return f"/quotas/{demo.quotas[name].pk}/{tab}"


def _cell(html: str, row_attr: str, field: str) -> str:
    """The text of one data-field cell in the row that carries row_attr."""
    row = re.search(rf"<tr {row_attr}[^>]*>(.*?)</tr>", html, re.S)
    assert row, row_attr
    cell = re.search(rf'data-field="{field}">(.*?)</td>', row.group(1), re.S)
    assert cell, field
    return re.sub(r"<[^>]+>", "", cell.group(1)).strip()


# --- who may open the tabs ---------------------------------------------------------------------


@pytest.mark.parametrize("tab", TABS, ids=TAB_IDS)
def test_admin_opens_every_tab_with_it_marked_current(demo: Demo, admin, login, tab) -> None:
    response = login(admin).get(_url(demo, "Quota 1.1", tab))
    assert response.status_code == 200
    html = response.content.decode()
    current = re.search(r'<a href="([^"]+)" class="active" aria-current="page">', html)
    assert current and current.group(1) == _url(demo, "Quota 1.1", tab)
    for label in ("Overview", "Nodes", "Jobs", "Monitoring"):
        assert f">{label}</a>" in html


@pytest.mark.parametrize("tab", TABS, ids=TAB_IDS)
@pytest.mark.parametrize("username", USERS, ids=[u or "anonymous" for u in USERS])
def test_team_members_get_404_and_anonymous_users_log_in(
    demo: Demo, login, tab: str, username: str | None
) -> None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username=username) if username else None
    url = _url(demo, "Quota 1.1", tab)
    response = login(user).get(url)
    if username is None:
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={url}"
    else:
        assert response.status_code == 404


def test_a_missing_quota_answers_404_on_every_tab(demo: Demo, admin, login) -> None:
    for tab in TABS:
        assert login(admin).get(f"/quotas/9999/{tab}").status_code == 404


# --- what they show ----------------------------------------------------------------------------


def test_overview_shows_guaranteed_allocated_and_borrowed(demo, admin, login, bob_jobs) -> None:
    html = login(admin).get(_url(demo, "Quota 1.1")).content.decode()
    row = 'data-pool="A100-80G"'
    assert _cell(html, row, "guaranteed") == "48"
    assert _cell(html, row, "own-allocated") == "48"
    assert _cell(html, row, "own-borrowed") == "40"
    assert _cell(html, row, "subtree-allocated") == "48"
    assert _cell(html, row, "subtree-borrowed") == "40"


def test_overview_of_the_parent_counts_its_children_in_the_subtree_only(
    demo, admin, login, bob_jobs
) -> None:
    html = login(admin).get(_url(demo, "Quota 1")).content.decode()
    row = 'data-pool="A100-80G"'
    assert _cell(html, row, "guaranteed") == "128"
    assert (_cell(html, row, "own-allocated"), _cell(html, row, "own-borrowed")) == ("0", "0")
    assert _cell(html, row, "subtree-allocated") == "48"
    assert _cell(html, row, "subtree-borrowed") == "40"
    # The audit log and the rest of the old Overview are still there.
    assert 'data-testid="audit-log"' in html and 'data-testid="children"' in html


def test_nodes_tab_shows_what_the_quota_holds_on_each_node(demo, admin, login, bob_jobs) -> None:
    response = login(admin).get(_url(demo, "Quota 1.1", "nodes/"))
    holdings = response.context["holdings"]
    assert len(holdings.nodes) == 16
    assert holdings.nodes_held == 11
    assert (holdings.in_quota, holdings.borrowed) == (48_000, 40_000)
    own_nodes = {p.node.name for p in Pod.objects.filter(workload=bob_jobs["own"])}
    extra_nodes = {p.node.name for p in Pod.objects.filter(workload=bob_jobs["extra"])}
    html = response.content.decode()
    node = sorted(own_nodes)[0]
    assert _cell(html, f'data-node="{node}"', "in-quota") == "8"
    assert _cell(html, f'data-node="{node}"', "free") == "0"
    node = sorted(extra_nodes)[0]
    assert _cell(html, f'data-node="{node}"', "borrowed") == "8"
    idle = next(n.name for n in Node.objects.all() if n.name not in own_nodes | extra_nodes)
    assert _cell(html, f'data-node="{idle}"', "free") == "8"
    assert "GPUs on <strong>11</strong> of 16 nodes: 48 In Quota, 40 borrowed" in html


def test_nodes_tab_of_quota_1_2_counts_bobs_pods_as_other_quotas(
    demo, admin, login, bob_jobs
) -> None:
    response = login(admin).get(_url(demo, "Quota 1.2", "nodes/"))
    holdings = response.context["holdings"]
    assert holdings.nodes_held == 0
    assert sum(n.others for n in holdings.nodes) == 88_000


def test_jobs_tab_lists_running_then_pending_with_labels_and_links(
    demo, admin, login, bob_jobs
) -> None:
    response = login(admin).get(_url(demo, "Quota 1.1", "jobs/"))
    assert [w.name for w in response.context["jobs"].page] == ["extra", "own", "waits"]
    html = response.content.decode()
    summary = "<strong>2</strong> running (1 In Quota, 1 Not in Quota) · <strong>1</strong> pending"
    assert summary in html
    for name, gpus in (("own", "48"), ("extra", "40"), ("waits", "8")):
        assert _cell(html, f'data-name="{name}"', "gpus") == gpus
        link = f'href="/workspaces/workspace_b/jobs/{bob_jobs[name].pk}/"'
        assert link in html
    assert _cell(html, 'data-name="own"', "in_quota") == "In Quota"
    assert _cell(html, 'data-name="extra"', "in_quota") == "Not in Quota"
    assert _cell(html, 'data-name="waits"', "status") == "Queued"
    reason = bob_jobs["waits"].pending_reason
    assert reason and _cell(html, 'data-name="waits"', "pending-reason") == reason
    assert "bob" in html and "workspace_b" in html


def test_jobs_tab_of_the_parent_includes_its_childrens_jobs(demo, admin, login, bob_jobs) -> None:
    response = login(admin).get(_url(demo, "Quota 1", "jobs/"))
    assert {w.name for w in response.context["jobs"].page} == {"own", "extra", "waits"}
    assert "<th>Quota</th>" in response.content.decode()
    response = login(admin).get(_url(demo, "Quota 1.2", "jobs/"))
    assert list(response.context["jobs"].page) == []
    assert "No running or pending job." in response.content.decode()


def test_monitoring_tab_charts_the_subtree_in_quota_and_borrowed(
    demo, admin, login, bob_jobs, clock
) -> None:
    for _ in range(10):
        clock.advance(60)
        usage_sample(now=clock.now())
    response = login(admin).get(_url(demo, "Quota 1", "monitoring/"))
    html = response.content.decode()
    figures = json.loads(
        re.search(r'id="quota-figures" type="application/json">(.*?)</script>', html, re.S).group(1)
    )
    traces = figures["allocation"]["data"]
    assert [t["name"] for t in traces] == ["In Quota", "borrowed"]
    assert set(traces[0]["y"]) == {48.0} and set(traces[1]["y"]) == {40.0}
    assert figures["allocation"]["layout"]["shapes"][0]["y0"] == 128
    assert set(figures["pending"]["data"][0]["y"]) == {8.0}
    assert "/static/plotly-finance/plotly-finance.min.js" in html and "js/quotas.js" in html
    assert "5-minute averages" in html


def test_monitoring_tab_without_samples_says_so(demo, admin, login) -> None:
    html = login(admin).get(_url(demo, "Quota 1.1", "monitoring/")).content.decode()
    assert "No usage samples yet." in html


# --- constant queries --------------------------------------------------------------------------


def _bulk_workloads(demo: Demo, bob: Any, n: int, start: Any) -> None:
    """n running workloads (a pod each, alternately In Quota and borrowed) and n queued ones,
    in Quota 1.1 and a child of it, plus a day of samples; written straight to the tables."""
    from quotas.services.quotas import quota_create
    from tests.quotas.builders import gpus

    child = quota_create(
        actor=None,
        name="Quota 1.1.1",
        resource_pool=demo.resource_pool,
        parent=demo.quotas["Quota 1.1"],
        resources={demo.node_pool: gpus(8)},
    )
    ws = demo.workspaces["workspace_b"]
    nodes = list(Node.objects.order_by("name"))
    rows = [
        Workload(
            workspace=ws,
            quota=child if i % 3 == 0 else demo.quotas["Quota 1.1"],
            owner=bob,
            name=f"bulk-{i}",
            kind=Kind.TRAINING,
            status=Status.RUNNING if i < n else Status.QUEUED,
            in_quota=(i % 2 == 0) if i < n else None,
            pending_reason="" if i < n else "Waiting for quota",
            gpu=1000,
            submitted_at=start + timedelta(seconds=i),
        )
        for i in range(2 * n)
    ]
    Workload.objects.bulk_create(rows)
    running = Workload.objects.filter(name__startswith="bulk-", status=Status.RUNNING)
    Pod.objects.bulk_create(
        Pod(
            workload=w,
            index=0,
            node=nodes[i % len(nodes)],
            devices=[i % 8],
            status=PodStatus.RUNNING,
            borrowed=not w.in_quota,
            created_at=start,
        )
        for i, w in enumerate(running)
    )
    UsageSample.objects.bulk_create(
        UsageSample(at=start + timedelta(minutes=m), quota=q, gpu_in_quota=m, gpu_borrowed=1)
        for m in range(0, 24 * 60, 2)
        for q in (demo.quotas["Quota 1.1"], child)
    )


@pytest.mark.parametrize("tab", TABS, ids=TAB_IDS)
def test_every_tab_makes_the_same_number_of_queries_for_few_or_many_jobs(
    demo, admin, bob, login, tab, django_assert_max_num_queries
) -> None:
    from console.clock import now

    client = login(admin)
    url = _url(demo, "Quota 1.1", tab)
    _bulk_workloads(demo, bob, 2, now() - timedelta(days=1))
    with CaptureQueriesContext(connection) as few:
        assert client.get(url).status_code == 200
    Workload.objects.filter(name__startswith="bulk-").delete()
    Node.objects.bulk_create(
        Node(node_pool=demo.node_pool, name=f"extra-{i:03d}", gpus=8, cpu=1000, memory=1024)
        for i in range(100)
    )
    from quotas.models import Quota

    Quota.objects.filter(name="Quota 1.1.1").delete()
    _bulk_workloads(demo, bob, 300, now() - timedelta(days=1))
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get(url)
    assert response.status_code == 200
    if tab == "jobs/":
        assert response.context["jobs"].running == 300
        assert response.context["jobs"].pending == 300
