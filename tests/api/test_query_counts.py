"""List endpoints run the same number of queries for 10 rows as for 1,000."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Prefetch
from django.test.utils import CaptureQueriesContext

from cluster.models import Node, NodePool
from jobs.choices import LIVE_POD_STATUSES, Kind, PodStatus, Status
from jobs.models import Pod, UsageSample, Workload, WorkloadEvent
from quotas.amounts import Amounts
from quotas.models import Quota
from quotas.services.quotas import quota_create

pytestmark = pytest.mark.django_db


def _seed(demo: Any, owner: Any, clock: Any, count: int) -> None:
    """`count` rows of every listed kind (workloads with pods and events, quotas, nodes…)."""
    ws, quota = demo.workspaces["workspace_b"], demo.quotas["Quota 1.1"]
    node = Node.objects.first()
    now = clock.now()
    existing = Workload.objects.count()
    rows = []
    for i in range(existing, existing + count):
        kind = (Kind.TRAINING, Kind.INFERENCE, Kind.INTERACTIVE)[i % 3]
        rows.append(
            Workload(
                workspace=ws,
                quota=quota,
                owner=owner,
                name=f"w{i}",
                kind=kind,
                status=Status.RUNNING,
                gpu=1000,
                submitted_at=now,
            )
        )
    created = Workload.objects.bulk_create(rows)
    through = Workload.node_pools.through
    through.objects.bulk_create(
        [through(workload_id=w.pk, nodepool_id=demo.node_pool.pk) for w in created]
    )
    Pod.objects.bulk_create(
        [
            Pod(workload=w, index=0, node=node, status=PodStatus.RUNNING, created_at=now)
            for w in created
        ]
    )
    WorkloadEvent.objects.bulk_create(
        [WorkloadEvent(workload=w, at=now, kind="submitted", message="x") for w in created]
    )
    start = Node.objects.count()
    Node.objects.bulk_create(
        [
            Node(node_pool=demo.node_pool, name=f"n{i}", gpus=0, cpu=0, memory=0)
            for i in range(start, start + count)
        ]
    )
    start = Quota.objects.count()
    parent = demo.quotas["Quota 1.2"]
    for i in range(start, start + min(count, 40)):
        quota_create(
            actor=owner,
            name=f"q{i}",
            resource_pool=demo.resource_pool,
            parent=parent,
            resources={demo.node_pool: Amounts()},
        )
    base = UsageSample.objects.count()
    UsageSample.objects.bulk_create(
        [
            UsageSample(at=now + timedelta(minutes=base + i), quota=quota, gpu_in_quota=1000)
            for i in range(count)
        ]
    )


LISTS = [
    "/api/v1/jobs/",
    "/api/v1/jobs/?workspace=workspace_b&status=Running",
    "/api/v1/services/",
    "/api/v1/instances/",
    "/api/v1/quotas/",
    "/api/v1/quotas/?view=tree",
    "/api/v1/nodes/",
    "/api/v1/node-pools/",
    "/api/v1/workspaces/",
    "/api/v1/usage/",
]


def _count(client: Any, url: str) -> int:
    client.get(url)  # warm the content-type cache first
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    return len(queries)


@pytest.mark.parametrize("user", ["admin", "bob"])
def test_list_queries_stay_constant_from_10_to_1000_rows(
    api: Any, demo: Any, admin: Any, bob: Any, clock: Any, user: str
) -> None:
    client = api(admin if user == "admin" else bob)
    _seed(demo, bob, clock, 10)
    small = {url: _count(client, url) for url in LISTS}
    _seed(demo, bob, clock, 990)
    large = {url: _count(client, url) for url in LISTS}
    assert large == small
    assert max(small.values()) <= 12


def _vary(demo: Any, clock: Any) -> None:
    """Rows that exercise every value the list shows: fractions, nulls, pools, pods."""
    extra = NodePool.objects.create(
        resource_pool=demo.resource_pool, name="a-first", gpu_model="H100"
    )
    node = Node.objects.first()
    for i, w in enumerate(Workload.objects.order_by("id")):
        w.gpu = (500, 1000, 250, 0, 1001)[i % 5]
        w.in_quota = (None, True, False)[i % 3]
        w.hang_minutes = None if i % 2 else 7
        w.max_duration = None if i % 2 else 3600
        w.idle_stop_minutes = 5 if i % 3 else None
        w.progress = 12.5 * i
        w.started_at = None if i % 4 == 0 else clock.now()
        w.ended_at = clock.now() + timedelta(microseconds=i) if i % 3 == 0 else None
        w.status_reason = "" if i % 2 else "why ✓"
        w.save()
        if i % 2:
            w.node_pools.add(extra)
        Pod.objects.create(
            workload=w,
            index=1,
            attempt=i % 2,
            node=None if i % 2 else node,
            status=PodStatus.FAILED,
            exit_code=None if i % 2 else 3,
            reason="r",
            created_at=clock.now(),
            started_at=clock.now(),
        )


@pytest.mark.parametrize("path", ["jobs", "services", "instances"])
def test_list_rows_show_what_the_model_serializers_show(
    api: Any, demo: Any, admin: Any, bob: Any, clock: Any, path: str
) -> None:
    """The list builds rows from values(); they match the declared serializer value for value."""
    from rest_framework.renderers import JSONRenderer

    from jobs.api import serializers as s

    _seed(demo, bob, clock, 30)
    _vary(demo, clock)
    serializer, kind = {
        "jobs": (s.JobSerializer, Kind.TRAINING),
        "services": (s.ServiceSerializer, Kind.INFERENCE),
        "instances": (s.InstanceSerializer, Kind.INTERACTIVE),
    }[path]
    pods = Pod.objects.select_related("node").order_by("index", "attempt")
    rows = (
        Workload.objects.filter(kind=kind)
        .select_related("workspace", "quota", "owner")
        .prefetch_related("node_pools", Prefetch("pods", queryset=pods))
    )
    expected = json.loads(JSONRenderer().render(serializer(rows, many=True).data))
    # history=1: every pod, as the serializer over all of them (a service shows only its live
    # pods by default).
    history = "&history=1" if path == "services" else ""  # the other kinds show every pod
    response = api(admin).get(f"/api/v1/{path}/?page_size=1000{history}")
    assert response.status_code == 200
    assert response.json()["results"] == expected
    assert len(expected) >= 10
    page = api(bob).get(f"/api/v1/{path}/?page_size=4&page=2{history}").json()
    assert page["results"] == expected[4:8]
    assert page["count"] == len(expected)
    current = api(admin).get(f"/api/v1/{path}/?page_size=1000").json()["results"]
    live = {p for w in current for p in (pod["status"] for pod in w["pods"])}
    assert path != "services" or live <= set(LIVE_POD_STATUSES)


@pytest.mark.parametrize("path", ["jobs", "services", "instances"])
def test_answers_to_actions_show_what_the_detail_serializers_show(
    api: Any, demo: Any, admin: Any, bob: Any, clock: Any, path: str
) -> None:
    """Submit, cancel and scale answer with rows built from values(), as the detail shows."""
    from rest_framework.renderers import JSONRenderer

    from console.fast.rows import workload_rows
    from jobs.api import serializers as s

    _seed(demo, bob, clock, 12)
    _vary(demo, clock)
    WorkloadEvent.objects.bulk_create(
        [
            WorkloadEvent(workload=w, at=clock.now(), kind="admitted", message="m ✓", data={"a": 1})
            for w in Workload.objects.all()
        ]
    )
    serializer, kind = {
        "jobs": (s.JobDetailSerializer, Kind.TRAINING),
        "services": (s.ServiceDetailSerializer, Kind.INFERENCE),
        "instances": (s.InstanceDetailSerializer, Kind.INTERACTIVE),
    }[path]
    events = WorkloadEvent.objects.order_by("at", "id")
    pods = Pod.objects.select_related("node").order_by("index", "attempt")
    rows = (
        Workload.objects.filter(kind=kind)
        .select_related("workspace", "quota", "owner")
        .prefetch_related(
            "node_pools", Prefetch("pods", queryset=pods), Prefetch("events", queryset=events)
        )
    )
    expected = json.loads(JSONRenderer().render(serializer(rows, many=True).data))
    built = json.loads(
        JSONRenderer().render(
            workload_rows([w.pk for w in rows], serializer, s.PodSerializer, s.EventSerializer)
        )
    )
    assert built == expected
    assert all(row["events"] and row["pods"] for row in built)
    # And through the API: a cancel answers with the detail of the job as stored now.
    job = Workload.objects.filter(kind=kind).order_by("id").first()
    assert job is not None
    action = "stop" if path == "instances" else "cancel"
    answer = api(bob).post(f"/api/v1/{path}/{job.pk}/{action}/")
    assert answer.status_code == 200, answer.content
    job.refresh_from_db()
    if path == "services":  # a service's answer shows its live pods
        pods = pods.filter(status__in=LIVE_POD_STATUSES)
    fresh = Workload.objects.filter(pk=job.pk).prefetch_related(
        "node_pools", Prefetch("pods", queryset=pods), Prefetch("events", queryset=events)
    )
    assert answer.json() == json.loads(JSONRenderer().render(serializer(fresh[0]).data))


@pytest.mark.parametrize("path", ["jobs", "services", "instances"])
def test_a_submit_reads_permissions_and_usage_rules_once_inside_its_transaction(
    api: Any, demo: Any, bob: Any, path: str
) -> None:
    """Visibility, the submit permission and the usage rules share one read, made under the
    write lock (what was checked is what the write sees)."""
    body: dict[str, Any] = {"workspace": "workspace_b", "name": "once", "gpu": 1}
    if path == "instances":
        body["max_duration"] = 3600
    client = api(bob)
    with CaptureQueriesContext(connection) as queries:
        response = client.post(f"/api/v1/{path}/", body, format="json")
    assert response.status_code == 201, response.content
    sql = [q["sql"] for q in queries.captured_queries]
    guardian = [i for i, q in enumerate(sql) if "guardian_userobjectpermission" in q]
    rules = [i for i, q in enumerate(sql) if 'FROM "workspaces_resourceusagerule"' in q]
    assert len(guardian) == 1 and len(rules) == 1
    # The test runs in a transaction, so the view's outermost atomic block is a savepoint.
    begin = next(i for i, q in enumerate(sql) if q.startswith("SAVEPOINT"))
    end = sql.index(f"RELEASE {sql[begin]}")
    assert begin < guardian[0] < end and begin < rules[0] < end


@pytest.mark.parametrize("path", ["jobs", "services", "instances"])
def test_a_submit_answers_what_reading_the_new_workload_shows(
    api: Any, demo: Any, bob: Any, path: str
) -> None:
    """The 201 answer is built from what the submit wrote; a GET of it shows the same."""
    pool = NodePool.objects.get()
    body: dict[str, Any] = {
        "workspace": "workspace_b",
        "name": "fresh",
        "gpu": 0.5,
        "cpu": 2000,
        "memory": 4096,
        "priority": 4,
        "node_pools": [pool.name, pool.name],
    }
    if path == "instances":
        body |= {"max_duration": 3600, "idle_stop_minutes": 30}
    elif path == "services":
        body |= {"replicas": 2, "max_replicas": 3}
    else:
        body |= {"idle_policy": "acceptable", "hang_minutes": 15, "total_work": 90.5}
    client = api(bob)
    answer = client.post(f"/api/v1/{path}/", body, format="json")
    assert answer.status_code == 201, answer.content
    shown = answer.json()
    assert shown["node_pools"] == [pool.name] and shown["events"][0]["kind"] == "submitted"
    assert client.get(f"/api/v1/{path}/{shown['id']}/").json() == shown
