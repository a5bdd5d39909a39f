"""Node pool and node pages: platform admins only; others get 404, anonymous users log in."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from cluster.models import Node, NodePool
from cluster.services import nodes_import
from console.demo import Demo

PERSONAS = ["admin", "alice", "bob", "carol", None]
# page name -> (method, status for the platform admin); every other persona gets 404.
NODE_PAGES = {
    "pools": ("get", 200),
    "pool_create": ("get", 200),
    "pool_create_post": ("post", 302),
    "pool": ("get", 200),
    "import": ("get", 200),
    "import_post": ("post", 302),
    "schedulable": ("post", 302),
}


def _request(demo: Demo, page: str) -> tuple[str, dict[str, Any]]:
    node = Node.objects.get(name="a100-01")
    return {
        "pools": (reverse("nodes:pools"), {}),
        "pool_create": (reverse("nodes:pool_create"), {}),
        "pool_create_post": (
            reverse("nodes:pool_create"),
            {"resource_pool": demo.resource_pool.pk, "name": "T4", "gpu_model": "T4"},
        ),
        "pool": (reverse("nodes:pool", args=[demo.node_pool.pk]), {}),
        "import": (reverse("nodes:import"), {}),
        "import_post": (
            reverse("nodes:import"),
            {
                "resource_pool": demo.resource_pool.pk,
                "format": "auto",
                "text": "name,pool,gpus,cpu,memory\nt4-01,T4,4,32000,131072\n",
            },
        ),
        "schedulable": (reverse("nodes:schedulable", args=[node.pk]), {"schedulable": "0"}),
    }[page]


@pytest.mark.parametrize(
    ("page", "method", "persona", "expected"),
    [
        pytest.param(
            page,
            method,
            persona,
            "login" if persona is None else admin_status if persona == "admin" else 404,
            id=f"{page}-{persona or 'anonymous'}",
        )
        for page, (method, admin_status) in NODE_PAGES.items()
        for persona in PERSONAS
    ],
)
def test_node_page_access(
    demo: Demo, login: Any, page: str, method: str, persona: str | None, expected: Any
) -> None:
    user = get_user_model().objects.get(username=persona) if persona else None
    url, data = _request(demo, page)
    nodes_before = Node.objects.count()
    response = getattr(login(user), method)(url, data)
    if expected == "login":
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login") + "?next=")
    else:
        assert response.status_code == expected
    if expected != 302:
        assert Node.objects.count() == nodes_before
        assert Node.objects.get(name="a100-01").schedulable


def test_pool_list_shows_counts_in_constant_queries(
    demo: Demo, login: Any, admin: Any, django_assert_max_num_queries: Any
) -> None:
    text = "name,pool,gpus,cpu,memory\n" + "".join(
        f"t4-{i:02d},T4,4,32000,131072\n" for i in range(30)
    )
    nodes_import(resource_pool=demo.resource_pool, text=text)
    client = login(admin)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("nodes:pools"))
    body = response.content.decode()
    assert '<tr data-pool="T4">' in body
    assert "2 node pools · 46 nodes · 248 GPUs" in body


def test_import_page_uploads_a_file(demo: Demo, login: Any, admin: Any) -> None:
    upload = SimpleUploadedFile(
        "spec.yaml", b"- {name: h-1, pool: H100, gpus: 8, cpu: 192000, memory: 2097152}\n"
    )
    response = login(admin).post(
        reverse("nodes:import"),
        {"resource_pool": demo.resource_pool.pk, "format": "auto", "file": upload},
        follow=True,
    )
    assert "Imported 1 nodes with 8 GPUs in 1 node pools. Created node pools: H100." in (
        response.content.decode()
    )
    assert NodePool.objects.get(name="H100").nodes.count() == 1


def test_import_page_shows_refusal_and_imports_nothing(demo: Demo, login: Any, admin: Any) -> None:
    text = "name,pool,gpus,cpu,memory\nok-1,T4,4,1,1\nbad-1,T4,eight,1,1\n"
    response = login(admin).post(
        reverse("nodes:import"),
        {"resource_pool": demo.resource_pool.pk, "format": "csv", "text": text},
    )
    assert response.status_code == 200
    assert "line 3: gpus &#x27;eight&#x27; is not a whole number. Nothing was imported." in (
        response.content.decode()
    )
    assert Node.objects.count() == 16


def test_import_page_needs_a_file_or_text(demo: Demo, login: Any, admin: Any) -> None:
    response = login(admin).post(
        reverse("nodes:import"), {"resource_pool": demo.resource_pool.pk, "format": "auto"}
    )
    assert "Choose a CSV or YAML file, or paste its text." in response.content.decode()


def test_pool_create_refuses_duplicate_name(demo: Demo, login: Any, admin: Any) -> None:
    response = login(admin).post(
        reverse("nodes:pool_create"),
        {"resource_pool": demo.resource_pool.pk, "name": "A100-80G", "gpu_model": ""},
    )
    assert response.status_code == 200
    assert "A node pool named A100-80G already exists." in response.content.decode()


def test_cordon_and_uncordon_a_node(demo: Demo, login: Any, admin: Any) -> None:
    client = login(admin)
    node = Node.objects.get(name="a100-03")
    client.post(reverse("nodes:schedulable", args=[node.pk]), {"schedulable": "0"})
    node.refresh_from_db()
    assert not node.schedulable
    page = client.get(reverse("nodes:pool", args=[demo.node_pool.pk])).content.decode()
    assert "Cordoned" in page and "Uncordon" in page
    client.post(reverse("nodes:schedulable", args=[node.pk]), {"schedulable": "1"})
    node.refresh_from_db()
    assert node.schedulable


def test_pool_page_lists_nodes_a_page_at_a_time(
    demo: Demo, login: Any, admin: Any, django_assert_max_num_queries: Any
) -> None:
    text = "name,pool,gpus,cpu,memory\n" + "".join(
        f"t4-{i:03d},T4,4,32000,131072\n" for i in range(150)
    )
    nodes_import(resource_pool=demo.resource_pool, text=text)
    pool = NodePool.objects.get(name="T4")
    client = login(admin)
    with django_assert_max_num_queries(9):
        first = client.get(reverse("nodes:pool", args=[pool.pk])).content.decode()
    assert first.count("<tr data-node=") == 100
    assert 'data-node="t4-099"' in first and 'data-node="t4-100"' not in first
    assert "Nodes 1–100 of 150 · page 1 of 2" in first
    second = client.get(reverse("nodes:pool", args=[pool.pk]), {"page": 2}).content.decode()
    assert second.count("<tr data-node=") == 50
    assert 'data-node="t4-149"' in second and "‹ Previous" in second


def test_cordon_returns_to_the_page_the_node_is_on(demo: Demo, login: Any, admin: Any) -> None:
    text = "name,pool,gpus,cpu,memory\n" + "".join(
        f"t4-{i:03d},T4,4,32000,131072\n" for i in range(120)
    )
    nodes_import(resource_pool=demo.resource_pool, text=text)
    node = Node.objects.get(name="t4-110")
    response = login(admin).post(
        reverse("nodes:schedulable", args=[node.pk]), {"schedulable": "0", "page": "2"}
    )
    assert response["Location"] == reverse("nodes:pool", args=[node.node_pool_id]) + "?page=2"
