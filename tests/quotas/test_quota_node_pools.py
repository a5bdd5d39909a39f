"""A quota restricted to node pools: the services keep children within their parent's pools
and name the pools when they refuse; the pages set and show the restriction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cluster.models import NodePool
from cluster.services import node_pool_create, resource_pool_create
from console.demo import Demo
from console.errors import DomainError
from quotas.models import Quota, QuotaAudit
from quotas.selectors import audit_changes
from quotas.services.quotas import quota_create, quota_scale, quota_update
from tests.quotas.builders import add_t4, allowed, dump, gpus, restrict

pytestmark = pytest.mark.django_db


@pytest.fixture
def t4(demo: Demo) -> NodePool:
    """A second node pool of the demo's resource pool: two 4-GPU T4 nodes."""
    return add_t4(demo)


def refused(**kwargs: Any) -> DomainError:
    """A quota_update that must refuse and write nothing; its error."""
    before = dump()
    with pytest.raises(DomainError) as info:
        quota_update(**kwargs)
    assert dump() == before
    return info.value


# --- services ----------------------------------------------------------------------------------


def test_restricting_a_quota_is_saved_versioned_and_audited(
    demo: Demo, admin: Any, t4: NodePool
) -> None:
    quota = restrict(admin, "Quota 1.1", demo.node_pool)
    assert allowed("Quota 1.1") == ["A100-80G"] and quota.version == 2
    record = QuotaAudit.objects.filter(quota=quota).first()
    assert record is not None and audit_changes(record) == ["node pools every pool → A100-80G"]


def test_a_child_may_not_allow_a_pool_its_parent_does_not(
    demo: Demo, admin: Any, t4: NodePool
) -> None:
    restrict(admin, "Quota 1", demo.node_pool)
    err = refused(actor=admin, quota=demo.quotas["Quota 1.1"], allowed_node_pools=[t4])
    assert err.field == "allowed_node_pools"
    assert err.message == (
        "Quota 1.1 may only narrow its parent's node pools: Quota 1 allows A100-80G, not T4."
    )


def test_a_new_child_may_not_allow_a_pool_its_parent_does_not(
    demo: Demo, admin: Any, t4: NodePool
) -> None:
    restrict(admin, "Quota 1", demo.node_pool)
    before = dump()
    with pytest.raises(DomainError) as info:
        quota_create(
            actor=admin,
            name="Quota 1.3",
            resource_pool=demo.resource_pool,
            parent=Quota.objects.get(name="Quota 1"),
            resources={},
            allowed_node_pools=[t4],
        )
    assert dump() == before
    assert info.value.message == (
        "Quota 1.3 may only narrow its parent's node pools: Quota 1 allows A100-80G, not T4."
    )


def test_narrowing_a_parent_below_a_childs_pools_is_refused_naming_the_child(
    demo: Demo, admin: Any, t4: NodePool
) -> None:
    # Quota 1 guarantees nothing on T4, so only the child's list stands in the way.
    restrict(admin, "Quota 1.2", demo.node_pool, t4)
    err = refused(actor=admin, quota=demo.quotas["Quota 1"], allowed_node_pools=[demo.node_pool])
    assert err.field == "allowed_node_pools"
    assert err.message == (
        "Quota 1.2 allows T4, but its parent Quota 1 would allow only A100-80G: narrow "
        "Quota 1.2's node pools first."
    )


def test_a_child_without_a_list_follows_its_parents_narrowing(
    demo: Demo, admin: Any, t4: NodePool
) -> None:
    restrict(admin, "Quota 1", demo.node_pool)
    assert allowed("Quota 1") == ["A100-80G"] and allowed("Quota 1.1") == []


def test_a_quota_may_not_be_kept_from_a_pool_it_guarantees(
    demo: Demo, admin: Any, t4: NodePool
) -> None:
    quota_scale(actor=admin, quota=demo.quotas["Quota 1"], resources={t4: gpus(4)})
    err = refused(actor=admin, quota=demo.quotas["Quota 1"], allowed_node_pools=[demo.node_pool])
    assert err.field == "allowed_node_pools"
    assert err.message == (
        "Quota 1 guarantees 4 GPUs on T4 but may run only in A100-80G: scale that min to 0 "
        "first, or allow T4."
    )


def test_a_restricted_quota_may_not_be_given_a_min_in_another_pool(
    demo: Demo, admin: Any, t4: NodePool
) -> None:
    quota_scale(actor=admin, quota=demo.quotas["Quota 1"], resources={t4: gpus(4)})
    restrict(admin, "Quota 1.1", demo.node_pool)
    before = dump()
    with pytest.raises(DomainError) as info:
        quota_scale(actor=admin, quota=demo.quotas["Quota 1.1"], resources={t4: gpus(2)})
    assert dump() == before
    assert "Quota 1.1 guarantees 2 GPUs on T4 but may run only in A100-80G" in info.value.message


def test_a_pool_of_another_resource_pool_is_refused(demo: Demo, admin: Any) -> None:
    other = resource_pool_create(name="lab")
    v100 = node_pool_create(resource_pool=other, name="V100", gpu_model="V100")
    err = refused(actor=admin, quota=demo.quotas["Quota 1"], allowed_node_pools=[v100])
    assert err.message == "Quota 1 allows node pool V100, which is not in resource pool general."


# --- pages -------------------------------------------------------------------------------------


def test_the_node_pools_page_restricts_the_quota_and_the_overview_shows_it(
    demo: Demo, admin: Any, login: Callable[[Any], Any], t4: NodePool
) -> None:
    client = login(admin)
    quota = demo.quotas["Quota 1"]
    page = client.get(f"/quotas/{quota.pk}/node-pools/")
    assert f'value="{t4.pk}"' in page.content.decode()
    response = client.post(
        f"/quotas/{quota.pk}/node-pools/",
        {"allowed_node_pools": [demo.node_pool.pk], "version": quota.version},
        follow=True,
    )
    text = response.content.decode()
    assert "Workloads of Quota 1 now run in A100-80G." in text
    assert 'data-testid="node-pools">only A100-80G <a' in text
    child = client.get(f"/quotas/{demo.quotas['Quota 1.1'].pk}/").content.decode()
    assert 'only A100-80G <span class="muted">(as its parent allows)</span>' in child


def test_the_node_pools_page_offers_a_child_only_its_parents_pools(
    demo: Demo, admin: Any, login: Callable[[Any], Any], t4: NodePool
) -> None:
    restrict(admin, "Quota 1", demo.node_pool)
    text = login(admin).get(f"/quotas/{demo.quotas['Quota 1.1'].pk}/node-pools/").content.decode()
    assert f'value="{demo.node_pool.pk}"' in text and f'value="{t4.pk}"' not in text
    assert "None checked: every pool Quota 1 allows (A100-80G)." in text


def test_the_node_pools_page_shows_a_refusal_on_the_field(
    demo: Demo, admin: Any, login: Callable[[Any], Any], t4: NodePool
) -> None:
    quota_scale(actor=admin, quota=demo.quotas["Quota 1"], resources={t4: gpus(4)})
    quota = Quota.objects.get(name="Quota 1")
    before = dump()
    response = login(admin).post(
        f"/quotas/{quota.pk}/node-pools/",
        {"allowed_node_pools": [demo.node_pool.pk], "version": quota.version},
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert errors["allowed_node_pools"] == [
        "Quota 1 guarantees 4 GPUs on T4 but may run only in A100-80G: scale that min to 0 "
        "first, or allow T4."
    ]
    assert dump() == before


def test_new_child_quota_form_restricts_the_child(
    demo: Demo, admin: Any, login: Callable[[Any], Any], t4: NodePool
) -> None:
    parent = demo.quotas["Quota 1"]
    response = login(admin).post(
        f"/quotas/{parent.pk}/children/new/",
        {"name": "Quota 1.3", "queue_strategy": "priority", "allowed_node_pools": [t4.pk]},
    )
    assert response.status_code == 302, response.context["form"].errors
    assert allowed("Quota 1.3") == ["T4"]
