"""The API never gives a member the node of a borrowed pod; platform admins get it everywhere.

Lists are built from rows (console.fast.rows), a detail by the serializers, an action's answer
(cancel, scale) from rows again: every path is searched for every node name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from jobs.choices import EventKind
from jobs.models import Pod, Workload
from jobs.services.workloads import Shape, instance_start, service_create
from tests.jobs.borrowing import borrow, named

pytestmark = pytest.mark.django_db


def _body(client: Any, url: str, method: str = "get") -> str:
    response = getattr(client, method)(url)
    assert response.status_code == 200, (url, response.content)
    return json.dumps(response.json())


def test_jobs_list_and_detail_give_members_no_node_of_a_borrowed_job(
    api: Callable[[Any], Any],
    bob: Any,
    admin: Any,
    submit: Callable[..., Workload],
    tick: Callable[..., None],
) -> None:
    job = borrow(submit, tick, bob)
    nodes = {p.node.name for p in job.pods.all()}
    urls = [
        "/api/v1/jobs/",
        "/api/v1/jobs/?status=Running",
        "/api/v1/jobs/?workspace=workspace_b",
        f"/api/v1/jobs/{job.pk}/",
    ]

    member = api(bob)
    for url in urls:
        assert named(_body(member, url)) == [], url
    detail = member.get(f"/api/v1/jobs/{job.pk}/").json()
    assert [(p["node"], p["borrowed"]) for p in detail["pods"]] == [(None, True)] * 7
    [placed] = [e for e in detail["events"] if e["kind"] == EventKind.PLACED]
    assert placed["message"] == "7 replicas placed on idle capacity."
    assert placed["data"] == {"borrowed": True}

    platform = api(admin)
    for url in urls:
        assert set(named(_body(platform, url))) == nodes, url
    detail = platform.get(f"/api/v1/jobs/{job.pk}/").json()
    assert {p["node"] for p in detail["pods"]} == nodes

    # A cancel answers from rows, as a list does: the same for the member.
    assert named(_body(member, f"/api/v1/jobs/{job.pk}/cancel/", "post")) == []


@pytest.mark.parametrize("kind", ["services", "instances"])
def test_services_and_instances_give_members_no_node_of_a_borrowed_pod(
    kind: str,
    api: Callable[[Any], Any],
    demo: Any,
    bob: Any,
    admin: Any,
    tick: Callable[..., None],
) -> None:
    ws = demo.workspaces["workspace_b"]
    common = {
        "actor": bob,
        "workspace": ws,
        "quota": demo.quotas["Quota 1.1"],
        "name": f"bob-{kind}",
        "shape": Shape(replicas=2, gpu=8000),
        "node_pools": [demo.node_pool],
    }
    if kind == "services":
        workload = service_create(**common, min_replicas=1, max_replicas=2)
    else:
        workload = instance_start(**common, max_duration=3600)
    tick(1)
    tick(30)
    # Neither borrows (both run In Quota only), but the rule is per pod, whatever the kind:
    # mark the pods as a placement on idle capacity would.
    assert Pod.objects.filter(workload=workload).update(borrowed=True) == 2
    nodes = set(workload.pods.values_list("node__name", flat=True))
    assert len(nodes) >= 1
    urls = [f"/api/v1/{kind}/", f"/api/v1/{kind}/{workload.pk}/"]

    for url in urls:
        assert named(_body(api(bob), url)) == [], url
        assert set(named(_body(api(admin), url))) == nodes, url
