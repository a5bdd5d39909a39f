"""Dashboard and GPU grid pages: platform admins only, constant queries, live sample pushes."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from cluster.models import Node
from cluster.services import nodes_import
from tests.dashboard.factories import T0, pod_on, running_workload, samples

PERSONAS = ["admin", "alice", "bob", "carol", None]
PAGES = ["dashboard:cluster", "nodes:grid"]


@pytest.mark.parametrize(
    ("page", "persona"),
    [pytest.param(p, u, id=f"{p}-{u or 'anonymous'}") for p in PAGES for u in PERSONAS],
)
def test_page_is_for_platform_admins_only(demo, login, page: str, persona: str | None) -> None:
    user = get_user_model().objects.get(username=persona) if persona else None
    response = login(user).get(reverse(page))
    if persona is None:
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login") + "?next=")
    elif persona == "admin":
        assert response.status_code == 200
    else:
        assert response.status_code == 404


def _queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured)


def _lots_of_usage(demo: Any) -> None:
    for name, in_quota, borrowed in (
        ("Quota 1", 64000, 0),
        ("Quota 1.1", 16000, 8000),
        ("Quota 1.2", 40000, 0),
    ):
        samples(demo.quotas[name], minutes=24 * 60, in_quota=in_quota, borrowed=borrowed)
    nodes = list(Node.objects.all())
    for i in range(200):
        job = running_workload(demo, name=f"job-{i}", gpu=500 if i % 3 else 1000)
        pod_on(job, nodes[i % len(nodes)], [i % 8], borrowed=i % 5 == 0)


def test_dashboard_queries_do_not_grow_with_data(
    demo, login, admin, django_assert_max_num_queries
) -> None:
    client = login(admin)
    url = reverse("dashboard:cluster")
    samples(demo.quotas["Quota 1"], minutes=3, in_quota=8000)
    small = _queries(client, url)
    _lots_of_usage(demo)
    with django_assert_max_num_queries(small):
        response = client.get(url)
    assert small <= 10
    figures = json.loads(json.dumps(response.context["figures"]))
    # 3 quotas × {In Quota, borrowed}, downsampled to 5-minute buckets.
    assert len(figures["allocation"]["data"]) == 6
    assert len(figures["allocation"]["data"][0]["x"]) == 24 * 12


def test_grid_queries_do_not_grow_with_nodes_or_pods(
    demo, login, admin, django_assert_max_num_queries
) -> None:
    client = login(admin)
    url = reverse("nodes:grid")
    small = _queries(client, url)
    text = "name,pool,gpus,cpu,memory\n" + "".join(
        f"t4-{i:03d},T4,4,32000,131072\n" for i in range(300)
    )
    nodes_import(resource_pool=demo.resource_pool, text=text)
    _lots_of_usage(demo)
    with django_assert_max_num_queries(small):
        response = client.get(url)
    assert small <= 8
    body = response.content.decode()
    assert body.count('<div class="gn') == 316
    assert body.count("<i class=") == 16 * 8 + 300 * 4 + 4  # the legend has four swatches


def test_grid_shows_cordoned_nodes_and_device_states(demo, login, admin) -> None:
    node = Node.objects.get(name="a100-03")
    job = running_workload(demo, name="half", gpu=500)
    pod_on(job, node, [0])
    pod_on(running_workload(demo, name="lent", gpu=1000), node, [1], borrowed=True)
    Node.objects.filter(name="a100-04").update(schedulable=False)
    body = login(admin).get(reverse("nodes:grid")).content.decode()
    assert (
        '<div class="gn" data-node="a100-03" title="a100-03 · schedulable · 6/8 free">'
        '<i class="shared"></i><i class="borrowed"></i><i class="free"></i>'
    ) in body
    assert '<div class="gn cordoned" data-node="a100-04" title="a100-04 · cordoned' in body


def test_dashboard_embeds_local_plotly_and_no_cdn(demo, login, admin) -> None:
    body = login(admin).get(reverse("dashboard:cluster")).content.decode()
    assert '<script src="/static/plotly-finance/plotly-finance.min.js" defer>' in body
    assert "cdn" not in body.lower()
    assert 'id="dashboard-figures"' in body


def test_dashboard_summary_uses_the_newest_sample(demo, login, admin) -> None:
    samples(demo.quotas["Quota 1"], start=T0, minutes=10, in_quota=8000)
    body = login(admin).get(reverse("dashboard:cluster")).content.decode()
    newest = T0 + timedelta(minutes=9)
    assert f'datetime="{newest.isoformat()}"' in body


@pytest.mark.django_db(transaction=True)
def test_usage_sample_pushes_to_the_cluster_group_after_commit(demo, admin) -> None:
    from channels.testing import WebsocketCommunicator

    from console.asgi import application
    from jobs.services.usage import usage_sample

    node = Node.objects.get(name="a100-01")
    pod_on(running_workload(demo, name="w", gpu=8000), node, list(range(8)))

    async def run() -> dict[str, Any]:
        from channels.db import database_sync_to_async

        ws = WebsocketCommunicator(
            application, "/ws/cluster/", headers=[(b"origin", b"http://127.0.0.1")]
        )
        ws.scope["user"] = admin
        connected, _ = await ws.connect()
        assert connected
        await database_sync_to_async(usage_sample)(now=T0)
        payload = await ws.receive_json_from(timeout=3)
        await ws.disconnect()
        return payload

    # Off the main thread: after a browser test, Playwright keeps an event loop running there.
    with ThreadPoolExecutor(max_workers=1) as pool:
        payload = pool.submit(asyncio.run, run()).result()
    q11 = str(demo.quotas["Quota 1.1"].pk)
    assert payload["kind"] == "sample"
    assert payload["at"] == T0.isoformat()
    assert payload["quotas"][q11] == {
        "in_quota": 8000,
        "borrowed": 0,
        "pending": 0,
        "preemptions": 0,
    }
    assert payload["allocated"] == 8000
    assert payload["capacity"] == 128_000


def test_pool_page_links_to_its_grid_and_the_grid_filters_by_pool(demo, login, admin) -> None:
    client = login(admin)
    pool = demo.node_pool
    body = client.get(reverse("nodes:pool", args=[pool.pk])).content.decode()
    assert f'href="{reverse("nodes:grid")}?pool={pool.pk}"' in body
    nodes_import(
        resource_pool=demo.resource_pool, text="name,pool,gpus,cpu,memory\nt4-1,T4,4,1,1\n"
    )
    body = client.get(reverse("nodes:grid"), {"pool": pool.pk}).content.decode()
    assert body.count('<div class="gn') == 16
    assert 'data-node="t4-1"' not in body
