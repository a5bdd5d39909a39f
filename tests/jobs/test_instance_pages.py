"""Interactive instance pages: the detail page and its Open link, the list's order and filter."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.urls import reverse
from kubernetes import client

from jobs.backends import set_backend
from jobs.backends.kubernetes import KubeConfig, KubernetesBackend
from jobs.choices import Kind, Status
from jobs.models import Workload
from jobs.services.workloads import Shape, instance_start, workload_cancel
from jobs.views.instances import PAGE_SIZE

pytestmark = pytest.mark.django_db

WS = "workspace_b"


@pytest.fixture
def notebook(demo: Any, bob: Any, clock: Any) -> Workload:
    """Bob's instance in Quota 1.1: one pod with half a GPU, two hours."""
    return instance_start(
        actor=bob,
        workspace=demo.workspaces[WS],
        quota=demo.quotas["Quota 1.1"],
        name="notebook",
        shape=Shape(replicas=1, gpu=500),
        node_pools=[demo.node_pool],
        max_duration=7200,
        now=clock.now(),
    )


def _detail(client: Any, instance: Workload) -> Any:
    return client.get(reverse("jobs:instance_detail", args=[WS, instance.pk]))


def test_detail_shows_status_quota_gpus_time_left_pods_and_timeline(
    notebook, login, bob, tick
) -> None:
    tick(1)
    tick(600)
    response = _detail(login(bob), notebook)
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-field="status">Running<' in body
    assert "Quota 1.1" in body and "In Quota" in body
    assert 'data-field="gpus">0.5<' in body
    assert "Time limit</dt><dd>2h 00m" in body
    assert 'data-field="time-left">1h 50m<' in body
    assert f"tp-{notebook.pk}-0-0" in body  # the pods table
    assert 'data-testid="timeline"' in body
    assert reverse("jobs:instance_stop", args=[WS, notebook.pk]) in body


def test_open_link_appears_only_while_the_instance_runs(notebook, login, bob, tick) -> None:
    tick(1)  # placed, pod starting
    assert 'data-testid="instance-open"' not in _detail(login(bob), notebook).content.decode()
    tick(30)  # running
    assert 'data-testid="instance-open"' in _detail(login(bob), notebook).content.decode()
    workload_cancel(actor=bob, workload=notebook)
    tick(1)
    body = _detail(login(bob), notebook).content.decode()
    assert 'data-testid="instance-open"' not in body
    assert reverse("jobs:instance_stop", args=[WS, notebook.pk]) not in body


def test_simulated_open_link_is_a_local_placeholder_naming_pod_and_node(
    notebook, login, bob, tick
) -> None:
    tick(1)
    tick(30)
    placeholder = reverse("jobs:instance_open", args=[WS, notebook.pk])
    body = _detail(login(bob), notebook).content.decode()
    assert f'href="{placeholder}"' in body
    page = login(bob).get(placeholder)
    assert page.status_code == 200
    text = page.content.decode()
    pod = notebook.pods.get()
    assert f"<code>{pod.name}</code>" in text
    assert f"<code>{pod.node.name}</code>" in text
    assert 'href="http' not in text  # nothing leaves the console


def test_placeholder_is_404_while_the_instance_does_not_run(notebook, login, bob, tick) -> None:
    tick(1)
    url = reverse("jobs:instance_open", args=[WS, notebook.pk])
    assert login(bob).get(url).status_code == 404


@override_settings(TIDEPOOL_INSTANCE_URL_TEMPLATE="https://notebooks.example/{namespace}/{pod}")
def test_kubernetes_open_link_fills_in_the_url_template(notebook, login, bob, tick) -> None:
    tick(1)
    tick(30)
    set_backend(KubernetesBackend(client.CoreV1Api(), KubeConfig()))  # no call is made
    body = _detail(login(bob), notebook).content.decode()
    pod = notebook.pods.get()
    assert f'href="https://notebooks.example/tidepool-workspace-b/{pod.name}"' in body


@pytest.mark.parametrize(
    "template", ["", "https://notebooks.example/{cluster}/{pod}"], ids=["unset", "unknown-key"]
)
def test_kubernetes_without_a_usable_template_shows_no_open_link(
    template, notebook, login, bob, tick, settings
) -> None:
    tick(1)
    tick(30)
    settings.TIDEPOOL_INSTANCE_URL_TEMPLATE = template
    set_backend(KubernetesBackend(client.CoreV1Api(), KubeConfig()))
    response = _detail(login(bob), notebook)
    assert response.status_code == 200
    assert 'data-testid="instance-open"' not in response.content.decode()


def test_start_form_speaks_of_an_instance_not_replicas(demo, login, bob) -> None:
    body = login(bob).get(reverse("jobs:instance_start", args=[WS])).content.decode()
    assert "replica" not in body.lower()
    assert "GPUs" in body and "Memory (GiB)" in body


def test_start_goes_to_the_new_instance_page(demo, login, bob, clock) -> None:
    data = {
        "name": "nb-2",
        "quota": demo.quotas["Quota 1.1"].pk,
        "node_pool": demo.node_pool.pk,
        "gpu": "1",
        "cpu": "4",
        "memory": "16",
        "max_hours": "2",
    }
    response = login(bob).post(reverse("jobs:instance_start", args=[WS]), data)
    created = Workload.objects.get(name="nb-2", kind=Kind.INTERACTIVE)
    assert response.status_code == 302
    assert response["Location"] == reverse("jobs:instance_detail", args=[WS, created.pk])


# Who may see it --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["jobs:instance_detail", "jobs:instance_live"])
def test_member_outsider_and_anonymous(name, notebook, login, bob, carol, admin) -> None:
    url = reverse(name, args=[WS, notebook.pk])
    assert login(bob).get(url).status_code == 200
    assert login(admin).get(url).status_code == 200
    assert login(carol).get(url).status_code == 404
    anonymous = login(None).get(url)
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]


def test_an_instance_of_another_workspace_is_404_under_mine(
    notebook, demo, login, alice, bob
) -> None:
    mine = "workspace_a"
    assert login(alice).get(reverse("jobs:instance_detail", args=[WS, notebook.pk])).status_code
    for name in ("jobs:instance_detail", "jobs:instance_live", "jobs:instance_open"):
        assert login(alice).get(reverse(name, args=[mine, notebook.pk])).status_code == 404


def test_a_job_is_not_an_instance(notebook, submit, login, bob) -> None:
    job = submit(bob, "resnet", gpus=1)
    assert login(bob).get(reverse("jobs:instance_detail", args=[WS, job.pk])).status_code == 404


# The list --------------------------------------------------------------------------------------


def _instances(demo: Any, bob: Any, clock: Any, count: int, status: str) -> list[Workload]:
    """Rows straight into the table: a minute apart, the last one newest."""
    start = clock.now()
    rows = [
        Workload(
            workspace=demo.workspaces[WS],
            quota=demo.quotas["Quota 1.1"],
            owner=bob,
            name=f"{status.lower()}-{i:03d}",
            kind=Kind.INTERACTIVE,
            status=status,
            gpu=1000,
            max_duration=3600,
            submitted_at=start + timedelta(minutes=i),
        )
        for i in range(count)
    ]
    return Workload.objects.bulk_create(rows)


def _names(response: Any) -> list[str]:
    return [r.workload.name for r in response.context["rows"]]


def test_list_is_newest_first_and_paged(demo, bob, login, clock) -> None:
    _instances(demo, bob, clock, PAGE_SIZE + 3, Status.QUEUED)
    url = reverse("jobs:instance_list", args=[WS])
    first = login(bob).get(url)
    assert _names(first)[:2] == [f"queued-{PAGE_SIZE + 2:03d}", f"queued-{PAGE_SIZE + 1:03d}"]
    assert len(_names(first)) == PAGE_SIZE
    assert first.context["next_link"] == "?page=2"
    second = login(bob).get(url + "?page=2")
    assert _names(second) == ["queued-002", "queued-001", "queued-000"]
    assert second.context["prev_link"] == "?page=1" and second.context["next_link"] is None


def test_list_hides_stopped_instances_unless_asked(demo, bob, login, clock) -> None:
    _instances(demo, bob, clock, 2, Status.RUNNING)
    _instances(demo, bob, clock, 2, Status.STOPPED)
    url = reverse("jobs:instance_list", args=[WS])
    active = login(bob).get(url)
    assert _names(active) == ["running-001", "running-000"]
    assert 'href="?show=all"' in active.content.decode()
    everything = login(bob).get(url + "?show=all")
    assert _names(everything) == ["stopped-001", "running-001", "stopped-000", "running-000"]


def test_list_paging_keeps_show_all(demo, bob, login, clock) -> None:
    _instances(demo, bob, clock, PAGE_SIZE + 1, Status.STOPPED)
    response = login(bob).get(reverse("jobs:instance_list", args=[WS]) + "?show=all")
    assert response.context["next_link"] == "?show=all&page=2"


def test_list_links_each_instance_to_its_page(notebook, login, bob) -> None:
    body = login(bob).get(reverse("jobs:instance_list", args=[WS])).content.decode()
    assert f'href="{reverse("jobs:instance_detail", args=[WS, notebook.pk])}"' in body


def test_list_query_count_does_not_grow_with_the_page(
    demo, bob, login, clock, django_assert_max_num_queries
) -> None:
    _instances(demo, bob, clock, 3, Status.RUNNING)
    client = login(bob)
    url = reverse("jobs:instance_list", args=[WS])
    with django_assert_max_num_queries(25) as few:
        client.get(url)
    _instances(demo, bob, clock, PAGE_SIZE, Status.QUEUED)
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get(url)
