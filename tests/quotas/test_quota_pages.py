"""The Resource Quota pages: who may open them, what they show, and what their forms do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from console.demo import Demo
from quotas.models import Quota, QuotaAudit, QuotaResource
from quotas.services.quotas import quota_create, quota_rebalance, quota_scale
from tests.quotas.builders import dump, gpus, min_gpus

pytestmark = pytest.mark.django_db

# --- permission matrix -------------------------------------------------------------------------

# (page id, method, URL with {pk} for Quota 1.1, admin's status)
PAGES = [
    ("list", "get", "/quotas/", 200),
    ("create", "get", "/quotas/new/", 200),
    ("overview", "get", "/quotas/{pk}/", 200),
    ("create_child", "get", "/quotas/{pk}/children/new/", 200),
    ("scale", "get", "/quotas/{pk}/scale/", 200),
    ("rebalance", "get", "/quotas/{pk}/rebalance/", 200),
    ("node_pools", "get", "/quotas/{pk}/node-pools/", 200),
    ("node_pools_post", "post", "/quotas/{pk}/node-pools/", 200),
    ("delete", "get", "/quotas/{pk}/delete/", 200),
    ("child_preemption", "post", "/quotas/{pk}/child-preemption/", 302),
]
USERS = ["admin", "alice", "bob", "carol", None]


@pytest.mark.parametrize(
    ("method", "url", "admin_status"),
    [p[1:] for p in PAGES],
    ids=[p[0] for p in PAGES],
)
@pytest.mark.parametrize("username", USERS, ids=[u or "anonymous" for u in USERS])
def test_only_platform_admins_open_quota_pages(
    demo: Demo,
    login: Callable[[Any], Any],
    username: str | None,
    method: str,
    url: str,
    admin_status: int,
) -> None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username=username) if username else None
    client = login(user)
    url = url.format(pk=demo.quotas["Quota 1.1"].pk)
    before = dump()
    response = getattr(client, method)(url)
    if username == "admin":
        assert response.status_code == admin_status
    elif username is None:
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={url}"
    else:
        assert response.status_code == 404
    if username != "admin":
        assert dump() == before


def test_a_missing_quota_answers_404_to_the_admin(demo: Demo, admin, login) -> None:
    assert login(admin).get("/quotas/9999/").status_code == 404


# --- the tree ----------------------------------------------------------------------------------


def test_list_shows_the_tree_with_amounts_badge_and_unassigned(demo: Demo, admin, login) -> None:
    response = login(admin).get("/quotas/")
    html = response.content.decode()
    rows = [r.quota.name for r in response.context["pools"][0].rows]
    assert rows == ["Quota 1", "Quota 1.1", "Quota 1.2"]
    assert [r.depth for r in response.context["pools"][0].rows] == [0, 1, 1]
    assert 'data-quota="Quota 1"' in html
    assert "Child-level Preemption" in html
    assert "Unassigned <strong>0</strong> of 128 GPUs" in html
    assert '<span data-bound="min">48</span> / <span data-bound="max">∞</span>' in html
    assert "Add Resource Quota" in html
    assert html.count(">Rebalance</a>") == 2  # Quota 1 has no sibling
    assert html.count("New Child-level Resource Quota") == 3


def _list_queries(client: Any) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/quotas/").status_code == 200
    return len(ctx.captured_queries)


def test_list_makes_the_same_number_of_queries_for_3_or_30_quotas(
    demo: Demo, admin, login, django_assert_max_num_queries
) -> None:
    client = login(admin)
    few = _list_queries(client)
    parent = demo.quotas["Quota 1.1"]
    for i in range(27):
        quota_create(
            actor=admin,
            name=f"Team {i}",
            resource_pool=demo.resource_pool,
            parent=parent,
            resources={demo.node_pool: gpus(1)},
            child_preemption=i % 2 == 0,
        )
    assert Quota.objects.count() == 30
    with django_assert_max_num_queries(few):
        client.get("/quotas/")


def test_overview_makes_the_same_number_of_queries_for_few_or_many_children(
    demo: Demo, admin, login, django_assert_max_num_queries
) -> None:
    client = login(admin)
    url = f"/quotas/{demo.quotas['Quota 1'].pk}/"  # two children
    with CaptureQueriesContext(connection) as ctx:
        client.get(url)
    for i in range(20):
        quota_create(
            actor=admin,
            name=f"Team {i}",
            resource_pool=demo.resource_pool,
            parent=demo.quotas["Quota 1"],
            resources={demo.node_pool: gpus(0)},
        )
    with django_assert_max_num_queries(len(ctx.captured_queries)):
        client.get(url)


# --- Add Resource Quota / New Child-level Resource Quota --------------------------------------


def _amounts_field(demo: Demo, bound: str, resource: str) -> str:
    return f"np{demo.node_pool.pk}_{bound}_{resource}"


def test_add_root_quota_converts_cores_and_gib(demo: Demo, admin, login) -> None:
    response = login(admin).post(
        "/quotas/new/",
        {
            "name": "Quota 2",
            "resource_pool": demo.resource_pool.pk,
            _amounts_field(demo, "min", "gpu"): "0",
            _amounts_field(demo, "min", "cpu"): "16",
            _amounts_field(demo, "min", "memory"): "64",
            _amounts_field(demo, "max", "gpu"): "16.5",
            "over_quota_weight": "2",
            "lend_idle": "on",
            "queue_strategy": "fifo",
        },
    )
    assert response.status_code == 302
    quota = Quota.objects.get(name="Quota 2")
    row = QuotaResource.objects.get(quota=quota)
    assert (row.min_gpu, row.min_cpu, row.min_memory, row.max_gpu) == (0, 16_000, 65_536, 16_500)
    assert (quota.parent, quota.over_quota_weight, quota.queue_strategy) == (None, 2.0, "fifo")
    assert (quota.lend_idle, quota.child_preemption) == (True, False)
    assert QuotaAudit.objects.get(quota=quota).actor == admin


def test_add_root_quota_over_capacity_shows_the_refusal_on_the_gpu_field(
    demo: Demo, admin, login
) -> None:
    before = dump()
    response = login(admin).post(
        "/quotas/new/",
        {
            "name": "Quota 2",
            "resource_pool": demo.resource_pool.pk,
            _amounts_field(demo, "min", "gpu"): "8",
            "queue_strategy": "priority",
        },
    )
    assert response.status_code == 200
    assert response.context["form"].errors[_amounts_field(demo, "min", "gpu")] == [
        "Resource pool general has 128 GPUs on A100-80G and its root quotas would need 136 GPUs "
        "(Quota 1 128 GPUs + Quota 2 8 GPUs). At most 0 GPUs fit for Quota 2."
    ]
    assert dump() == before


def test_new_child_quota_fixes_the_parent(demo: Demo, admin, login) -> None:
    client = login(admin)
    q12 = demo.quotas["Quota 1.2"]
    page = client.get(f"/quotas/{q12.pk}/children/new/")
    assert "resource_pool" not in page.context["form"].fields
    assert "New Child-level Resource Quota of Quota 1.2" in page.content.decode()
    response = client.post(
        f"/quotas/{q12.pk}/children/new/",
        {
            "name": "Quota 1.2.1",
            _amounts_field(demo, "min", "gpu"): "0.5",
            "queue_strategy": "priority",
            "child_preemption": "on",
        },
    )
    assert response.status_code == 302
    child = Quota.objects.get(name="Quota 1.2.1")
    assert (child.parent, child.child_preemption) == (q12, True)
    assert min_gpus("Quota 1.2.1") == 0.5


def test_add_quota_refuses_bad_numbers_on_their_fields(demo: Demo, admin, login) -> None:
    response = login(admin).post(
        "/quotas/new/",
        {
            "name": "",
            "resource_pool": demo.resource_pool.pk,
            _amounts_field(demo, "min", "gpu"): "abc",
            _amounts_field(demo, "min", "cpu"): "-1",
            _amounts_field(demo, "min", "memory"): "0.001",
            "queue_strategy": "priority",
        },
    )
    errors = response.context["form"].errors
    assert "name" in errors
    assert errors[_amounts_field(demo, "min", "gpu")] == ["Enter a number."]
    assert errors[_amounts_field(demo, "min", "cpu")] == [
        "Ensure this value is greater than or equal to 0."
    ]
    assert errors[_amounts_field(demo, "min", "memory")] == ["0.001 is finer than 1 MiB."]
    assert Quota.objects.count() == 3


def test_add_quota_shows_a_service_error_on_a_settings_field(demo: Demo, admin, login) -> None:
    response = login(admin).post(
        "/quotas/new/",
        {
            "name": "Quota 2",
            "resource_pool": demo.resource_pool.pk,
            "over_quota_weight": "-1",
            "queue_strategy": "priority",
        },
    )
    assert response.context["form"].errors["over_quota_weight"] == [
        "Over-quota weight must be above 0, not -1.0."
    ]


# --- Scale -------------------------------------------------------------------------------------


def test_scale_page_shows_current_amounts(demo: Demo, admin, login) -> None:
    response = login(admin).get(f"/quotas/{demo.quotas['Quota 1.2'].pk}/scale/")
    form = response.context["form"]
    assert form[_amounts_field(demo, "min", "gpu")].value() == 80
    assert form[_amounts_field(demo, "max", "gpu")].value() is None
    assert form["version"].value() == 1


def test_scale_refused_shows_the_message_and_changes_nothing(demo: Demo, admin, login) -> None:
    q11 = demo.quotas["Quota 1.1"]
    before = dump()
    response = login(admin).post(
        f"/quotas/{q11.pk}/scale/", {_amounts_field(demo, "min", "gpu"): "56", "version": "1"}
    )
    assert response.status_code == 200
    message = (
        "Quota 1 has 128 GPUs on A100-80G and its children would need 136 GPUs "
        "(Quota 1.1 56 GPUs + Quota 1.2 80 GPUs). At most 48 GPUs fit for Quota 1.1."
    )
    assert response.context["form"].errors[_amounts_field(demo, "min", "gpu")] == [message]
    assert message in response.content.decode()
    assert dump() == before


def test_scale_within_the_parent_saves_min_and_max(demo: Demo, admin, login) -> None:
    q11 = demo.quotas["Quota 1.1"]
    response = login(admin).post(
        f"/quotas/{q11.pk}/scale/",
        {
            _amounts_field(demo, "min", "gpu"): "47.5",
            _amounts_field(demo, "max", "gpu"): "64",
            "version": "1",
            "confirm": "1",
        },
    )
    assert response.status_code == 302
    row = QuotaResource.objects.get(quota=q11)
    assert (row.min_gpu, row.max_gpu) == (47_500, 64_000)


def test_scale_max_below_min_shows_on_the_max_field(demo: Demo, admin, login) -> None:
    response = login(admin).post(
        f"/quotas/{demo.quotas['Quota 1.1'].pk}/scale/",
        {
            _amounts_field(demo, "min", "gpu"): "48",
            _amounts_field(demo, "max", "gpu"): "40",
            "version": "1",
        },
    )
    assert response.context["form"].errors[_amounts_field(demo, "max", "gpu")] == [
        "Quota 1.1: max 40 GPUs on A100-80G is below its min 48 GPUs."
    ]


def test_scale_of_a_stale_page_is_refused_for_the_whole_form(demo: Demo, admin, login) -> None:
    q11 = demo.quotas["Quota 1.1"]
    quota_scale(actor=admin, quota=q11, resources={demo.node_pool: gpus(40)})
    before = dump()
    response = login(admin).post(
        f"/quotas/{q11.pk}/scale/", {_amounts_field(demo, "min", "gpu"): "30", "version": "1"}
    )
    assert response.context["form"].non_field_errors() == [
        "Quota 1.1 is at version 2, not 1: it changed since you loaded it."
    ]
    assert dump() == before


# --- Rebalance ---------------------------------------------------------------------------------


def test_rebalance_moves_8_gpus_and_the_tree_shows_56_and_72(demo: Demo, admin, login) -> None:
    client = login(admin)
    q11, q12 = demo.quotas["Quota 1.1"], demo.quotas["Quota 1.2"]
    response = client.post(
        f"/quotas/{q12.pk}/rebalance/",
        {"target": q11.pk, "node_pool": demo.node_pool.pk, "gpu": "8", "confirm": "1"},
    )
    assert response.status_code == 302
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (56, 72)
    tree = client.get("/quotas/").context["pools"][0].rows
    assert [r.amounts["A100-80G"].min_gpu for r in tree] == [128_000, 56_000, 72_000]


def test_rebalance_refused_shows_the_message_on_the_gpu_field(demo: Demo, admin, login) -> None:
    q11, q12 = demo.quotas["Quota 1.1"], demo.quotas["Quota 1.2"]
    before = dump()
    response = login(admin).post(
        f"/quotas/{q12.pk}/rebalance/",
        {"target": q11.pk, "node_pool": demo.node_pool.pk, "gpu": "81"},
    )
    assert response.context["form"].errors["gpu"] == [
        "Quota 1.2 guarantees 80 GPUs on A100-80G; it cannot give 81 GPUs."
    ]
    assert dump() == before


def test_rebalance_offers_only_siblings(demo: Demo, admin, login) -> None:
    response = login(admin).get(f"/quotas/{demo.quotas['Quota 1.2'].pk}/rebalance/")
    targets = list(response.context["form"].fields["target"].queryset)
    assert targets == [demo.quotas["Quota 1.1"]]
    response = login(admin).post(
        f"/quotas/{demo.quotas['Quota 1.2'].pk}/rebalance/",
        {"target": demo.quotas["Quota 1"].pk, "node_pool": demo.node_pool.pk, "gpu": "1"},
    )
    assert "target" in response.context["form"].errors


# --- Overview: toggle, children, workspaces, audit --------------------------------------------


def test_overview_shows_children_workspaces_and_audit(demo: Demo, admin, login) -> None:
    quota_rebalance(
        actor=admin,
        source=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        node_pool=demo.node_pool,
        gpu=8000,
    )
    client = login(admin)
    html = client.get(f"/quotas/{demo.quotas['Quota 1'].pk}/").content.decode()
    assert 'data-quota="Quota 1.1"' in html and 'data-quota="Quota 1.2"' in html
    assert "workspace_a" in html
    assert "Child-level preemption is <strong>on</strong>" in html
    response = client.get(f"/quotas/{demo.quotas['Quota 1.1'].pk}/")
    audit = response.context["overview"].audit
    assert [e.record.action for e in audit] == ["rebalance", "create"]
    assert audit[0].changes == [
        "Quota 1.1: A100-80G GPU min 48 → 56",
        "Quota 1.2: A100-80G GPU min 80 → 72",
    ]
    assert audit[1].changes == ["parent Quota 1", "lend idle on", "A100-80G GPU min 48"]
    html = response.content.decode()
    assert "Quota 1.1: A100-80G GPU min 48 → 56" in html
    assert "workspace_b" in html
    assert ">admin</td>" in html


def test_overview_audit_spells_out_a_scale(demo: Demo, admin, login) -> None:
    q11 = demo.quotas["Quota 1.1"]
    quota_scale(actor=admin, quota=q11, resources={demo.node_pool: gpus(40, 64)})
    entry = login(admin).get(f"/quotas/{q11.pk}/").context["overview"].audit[0]
    assert entry.changes == ["A100-80G GPU min 48 → 40", "A100-80G GPU max ∞ → 64"]


def test_toggle_turns_child_preemption_off_and_audits_it(demo: Demo, admin, login) -> None:
    q1 = demo.quotas["Quota 1"]
    client = login(admin)
    response = client.post(f"/quotas/{q1.pk}/child-preemption/", {"version": "1"})
    assert response["Location"] == f"/quotas/{q1.pk}/"
    assert Quota.objects.get(pk=q1.pk).child_preemption is False
    entry = client.get(f"/quotas/{q1.pk}/").context["overview"].audit[0]
    assert entry.changes == ["child-level preemption on → off"]
    client.post(f"/quotas/{q1.pk}/child-preemption/", {"version": "2", "enabled": "on"})
    assert Quota.objects.get(pk=q1.pk).child_preemption is True


def test_toggle_from_a_stale_page_changes_nothing(demo: Demo, admin, login) -> None:
    q1 = demo.quotas["Quota 1"]
    before = dump()
    response = login(admin).post(
        f"/quotas/{q1.pk}/child-preemption/", {"version": "5"}, follow=True
    )
    assert "is at version 1, not 5" in response.content.decode()
    assert dump() == before


def test_toggle_answers_405_to_get(demo: Demo, admin, login) -> None:
    assert (
        login(admin).get(f"/quotas/{demo.quotas['Quota 1'].pk}/child-preemption/").status_code
        == 405
    )


# --- Delete ------------------------------------------------------------------------------------


def test_delete_refused_with_children_shows_the_message(demo: Demo, admin, login) -> None:
    before = dump()
    response = login(admin).post(f"/quotas/{demo.quotas['Quota 1'].pk}/delete/")
    assert response.status_code == 200
    assert (
        "Quota 1 has child quotas (Quota 1.1, Quota 1.2); delete them first."
        in response.content.decode()
    )
    assert dump() == before


def test_delete_refused_with_a_bound_workspace_shows_the_message(demo: Demo, admin, login) -> None:
    response = login(admin).post(f"/quotas/{demo.quotas['Quota 1.2'].pk}/delete/")
    assert (
        "Quota 1.2 is bound to workspaces (workspace_c); unbind it first."
        in response.content.decode()
    )
    assert Quota.objects.filter(name="Quota 1.2").exists()


def test_delete_removes_a_leaf_quota(demo: Demo, admin, login) -> None:
    leaf = quota_create(
        actor=admin,
        name="Quota 1.2.1",
        resource_pool=demo.resource_pool,
        parent=demo.quotas["Quota 1.2"],
        resources={demo.node_pool: gpus(8)},
    )
    response = login(admin).post(f"/quotas/{leaf.pk}/delete/")
    assert response.status_code == 302
    assert not Quota.objects.filter(pk=leaf.pk).exists()
    assert QuotaAudit.objects.filter(quota_name="Quota 1.2.1", action="delete").exists()
