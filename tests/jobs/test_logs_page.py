"""The Logs card of the workload pages: rendered empty, filled by static/js/logs.js from the API."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from jobs.models import Workload
from jobs.services.workloads import Shape, instance_start
from workspaces.choices import Role
from workspaces.services import workspace_member_add

pytestmark = pytest.mark.django_db


def logs_url(html: str) -> str:
    """Where the page's Logs card asks for lines."""
    found = re.search(r'id="logs" data-logs-url="([^"]+)"', html)
    assert found, "no Logs card"
    return found[1]


def test_the_job_page_asks_for_its_logs_after_loading_and_the_answer_has_the_lines(
    client: Any,
    bob: Any,
    demo: Any,
    submit: Callable[..., Workload],
    tick: Callable[..., None],
) -> None:
    job = submit(bob, "resnet", replicas=2)
    tick(0)
    tick(31)
    tick(300)
    viewer = get_user_model().objects.create_user("vera", password="x")
    workspace_member_add(workspace=demo.workspaces["workspace_b"], user=viewer, role=Role.VIEWER)
    client.force_login(viewer)
    page = client.get(f"/workspaces/workspace_b/jobs/{job.pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and "js/logs.js" in html
    # The page itself reads no log: the lines come from the endpoint the card names.
    assert "loss" not in html
    url = logs_url(html)
    assert url == f"/api/v1/jobs/{job.pk}/logs/"
    answer = client.get(url, {"replica": 1}).json()
    assert answer["replicas"] == [0, 1] and "[rank 1] step 10 loss" in answer["lines"][-1]


def test_service_and_instance_pages_have_a_logs_card_for_their_kind(
    client: Any, alice: Any, demo: Any, clock: Any, service: Workload
) -> None:
    notebook = instance_start(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="nb",
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        max_duration=3600,
        now=clock.now(),
    )
    client.force_login(alice)
    service_page = client.get(f"/workspaces/workspace_a/services/{service.pk}/").content.decode()
    assert logs_url(service_page) == f"/api/v1/services/{service.pk}/logs/"
    instance_page = client.get(f"/workspaces/workspace_a/instances/{notebook.pk}/")
    assert logs_url(instance_page.content.decode()) == f"/api/v1/instances/{notebook.pk}/logs/"


def test_another_workspace_member_gets_neither_the_page_nor_the_lines(
    client: Any, alice: Any, bob: Any, submit: Callable[..., Workload], tick: Any
) -> None:
    job = submit(bob, "resnet")
    tick(0)
    tick(31)
    client.force_login(alice)
    assert client.get(f"/workspaces/workspace_b/jobs/{job.pk}/").status_code == 404
    assert client.get(f"/api/v1/jobs/{job.pk}/logs/").status_code == 404
