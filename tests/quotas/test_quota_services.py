"""The quota services keep the tree's invariants, name the numbers when they refuse, and audit."""

from __future__ import annotations

import pytest

from cluster.services import node_pool_create, resource_pool_create
from console.demo import Demo
from console.errors import DomainError
from quotas.amounts import Amounts
from quotas.models import Quota, QuotaAudit, QuotaResource
from quotas.services.quotas import (
    StaleVersion,
    quota_create,
    quota_delete,
    quota_rebalance,
    quota_scale,
    quota_set_child_preemption,
    quota_update,
)
from tests.quotas.builders import dump, gpus, min_gpus, tree_violations

pytestmark = pytest.mark.django_db


def refused(call, *args, **kwargs) -> DomainError:
    """Run a service that must refuse; check it wrote nothing and return its error."""
    before = dump()
    with pytest.raises(DomainError) as info:
        call(*args, **kwargs)
    assert dump() == before
    return info.value


def test_demo_tree_is_sound(demo: Demo) -> None:
    assert tree_violations() == []
    assert [min_gpus(n) for n in ("Quota 1", "Quota 1.1", "Quota 1.2")] == [128, 48, 80]


# --- roots' min ≤ the resource pool's capacity -------------------------------------------------


def test_create_root_refuses_more_than_the_pool_has(demo: Demo, admin) -> None:
    err = refused(
        quota_create,
        actor=admin,
        name="Quota 2",
        resource_pool=demo.resource_pool,
        resources={demo.node_pool: gpus(8)},
    )
    assert err.field == "min_gpu"
    assert err.message == (
        "Resource pool general has 128 GPUs on A100-80G and its root quotas would need 136 GPUs "
        "(Quota 1 128 GPUs + Quota 2 8 GPUs). At most 0 GPUs fit for Quota 2."
    )


def test_scale_root_refuses_more_than_the_pool_has(demo: Demo, admin) -> None:
    err = refused(
        quota_scale,
        actor=admin,
        quota=demo.quotas["Quota 1"],
        resources={demo.node_pool: gpus(129)},
    )
    assert err.message == (
        "Resource pool general has 128 GPUs on A100-80G and its root quotas would need 129 GPUs "
        "(Quota 1 129 GPUs). At most 128 GPUs fit for Quota 1."
    )


def test_create_root_with_no_gpus_but_cpu_is_allowed(demo: Demo, admin) -> None:
    quota = quota_create(
        actor=admin,
        name="Quota 2",
        resource_pool=demo.resource_pool,
        resources={demo.node_pool: Amounts(min_gpu=0, min_cpu=16_000, min_memory=65_536)},
    )
    row = QuotaResource.objects.get(quota=quota)
    assert (row.min_gpu, row.min_cpu, row.min_memory) == (0, 16_000, 65_536)
    assert tree_violations() == []


# --- children's min ≤ the parent's min ---------------------------------------------------------


def test_scale_refuses_more_than_parent_has(demo: Demo, admin) -> None:
    err = refused(
        quota_scale,
        actor=admin,
        quota=demo.quotas["Quota 1.1"],
        resources={demo.node_pool: gpus(56)},
    )
    assert err.field == "min_gpu"
    assert getattr(err, "node_pool", None) == "A100-80G"
    assert err.message == (
        "Quota 1 has 128 GPUs on A100-80G and its children would need 136 GPUs "
        "(Quota 1.1 56 GPUs + Quota 1.2 80 GPUs). At most 48 GPUs fit for Quota 1.1."
    )


def test_create_child_refuses_more_than_parent_has_left(demo: Demo, admin) -> None:
    err = refused(
        quota_create,
        actor=admin,
        name="Quota 1.3",
        resource_pool=demo.resource_pool,
        parent=demo.quotas["Quota 1"],
        resources={demo.node_pool: gpus(0.5)},
    )
    assert err.message == (
        "Quota 1 has 128 GPUs on A100-80G and its children would need 128.5 GPUs "
        "(Quota 1.1 48 GPUs + Quota 1.2 80 GPUs + Quota 1.3 0.5 GPUs). "
        "At most 0 GPUs fit for Quota 1.3."
    )


def test_scale_parent_refuses_to_go_below_its_children(demo: Demo, admin) -> None:
    err = refused(
        quota_scale,
        actor=admin,
        quota=demo.quotas["Quota 1"],
        resources={demo.node_pool: gpus(100)},
    )
    assert err.message == (
        "Quota 1 would guarantee 100 GPUs on A100-80G, but its children already hold "
        "128 GPUs (Quota 1.1 48 GPUs + Quota 1.2 80 GPUs)."
    )


def test_scale_accepts_fractional_gpus_within_the_parent(demo: Demo, admin) -> None:
    quota = quota_scale(
        actor=admin, quota=demo.quotas["Quota 1.1"], resources={demo.node_pool: gpus(47.5)}
    )
    assert min_gpus("Quota 1.1") == 47.5
    assert quota.version == 2


def test_grandchildren_fit_in_their_parent(demo: Demo, admin) -> None:
    q11 = demo.quotas["Quota 1.1"]
    quota_create(
        actor=admin,
        name="Quota 1.1.1",
        resource_pool=demo.resource_pool,
        parent=q11,
        resources={demo.node_pool: gpus(40)},
    )
    err = refused(
        quota_create,
        actor=admin,
        name="Quota 1.1.2",
        resource_pool=demo.resource_pool,
        parent=q11,
        resources={demo.node_pool: gpus(10)},
    )
    assert "At most 8 GPUs fit for Quota 1.1.2." in err.message


# --- max ≥ min; amounts ≥ 0 ------------------------------------------------------------------


def test_scale_refuses_a_max_below_the_min(demo: Demo, admin) -> None:
    err = refused(
        quota_scale,
        actor=admin,
        quota=demo.quotas["Quota 1.1"],
        resources={demo.node_pool: gpus(48, max_gpus=40)},
    )
    assert err.field == "max_gpu"
    assert err.message == "Quota 1.1: max 40 GPUs on A100-80G is below its min 48 GPUs."


def test_scale_accepts_a_max_above_the_min(demo: Demo, admin) -> None:
    quota_scale(
        actor=admin, quota=demo.quotas["Quota 1.1"], resources={demo.node_pool: gpus(48, 96)}
    )
    assert QuotaResource.objects.get(quota__name="Quota 1.1").max_gpu == 96_000


def test_scale_refuses_a_negative_amount(demo: Demo, admin) -> None:
    err = refused(
        quota_scale,
        actor=admin,
        quota=demo.quotas["Quota 1.1"],
        resources={demo.node_pool: Amounts(min_gpu=48_000, min_cpu=-1)},
    )
    assert err.field == "min_cpu"
    assert err.message == "min -1 millicores on A100-80G is below 0."


# --- structure: cycles, resource pools, node pools, names ----------------------------------------


def test_a_cycle_in_the_tree_is_refused(demo: Demo, admin) -> None:
    # No service moves a quota, so make the cycle by hand and see the next write refuse.
    Quota.objects.filter(name="Quota 1").update(parent=demo.quotas["Quota 1.2"])
    err = refused(
        quota_scale,
        actor=admin,
        quota=demo.quotas["Quota 1.1"],
        resources={demo.node_pool: gpus(1)},
    )
    assert err.field == "parent"
    assert err.message == "Quota 1 cannot be its own ancestor."


def test_create_refuses_a_parent_in_another_resource_pool(demo: Demo, admin) -> None:
    spare = resource_pool_create(name="spare")
    err = refused(
        quota_create,
        actor=admin,
        name="Quota S",
        resource_pool=spare,
        parent=demo.quotas["Quota 1"],
        resources={},
    )
    assert err.field == "parent"
    assert err.message == "Quota 1 belongs to resource pool general, not spare."


def test_create_refuses_a_node_pool_of_another_resource_pool(demo: Demo, admin) -> None:
    spare = resource_pool_create(name="spare")
    t4 = node_pool_create(resource_pool=spare, name="T4", gpu_model="T4")
    err = refused(
        quota_create,
        actor=admin,
        name="Quota 2",
        resource_pool=demo.resource_pool,
        resources={t4: gpus(0)},
    )
    assert err.field == "resources"
    assert err.message == "Quota 2 names a node pool outside resource pool general."


def test_create_refuses_a_duplicate_name(demo: Demo, admin) -> None:
    err = refused(
        quota_create, actor=admin, name="Quota 1.1", resource_pool=demo.resource_pool, resources={}
    )
    assert (err.field, err.message) == ("name", "A quota named Quota 1.1 already exists.")


def test_create_refuses_a_weight_of_zero(demo: Demo, admin) -> None:
    err = refused(
        quota_create,
        actor=admin,
        name="Q",
        resource_pool=demo.resource_pool,
        resources={},
        over_quota_weight=0,
    )
    assert (err.field, err.message) == (
        "over_quota_weight",
        "Over-quota weight must be above 0, not 0.",
    )


# --- delete ------------------------------------------------------------------------------------


def test_delete_refuses_a_quota_with_children(demo: Demo, admin) -> None:
    err = refused(quota_delete, actor=admin, quota=demo.quotas["Quota 1"])
    assert err.message == "Quota 1 has child quotas (Quota 1.1, Quota 1.2); delete them first."


def test_delete_refuses_a_quota_bound_to_a_workspace(demo: Demo, admin) -> None:
    err = refused(quota_delete, actor=admin, quota=demo.quotas["Quota 1.1"])
    assert err.message == ("Quota 1.1 is bound to workspaces (workspace_b); unbind it first.")


def test_delete_removes_a_leaf_and_audits_it(demo: Demo, admin) -> None:
    leaf = quota_create(
        actor=admin,
        name="Quota 1.1.1",
        resource_pool=demo.resource_pool,
        parent=demo.quotas["Quota 1.1"],
        resources={demo.node_pool: gpus(8)},
    )
    quota_delete(actor=admin, quota=leaf)
    assert not Quota.objects.filter(name="Quota 1.1.1").exists()
    record = QuotaAudit.objects.filter(quota_name="Quota 1.1.1").first()
    assert record is not None
    assert (record.action, record.actor, record.after) == ("delete", admin, None)
    assert record.before["resources"]["A100-80G"]["min"]["gpu"] == 8000
    assert tree_violations() == []


# --- rebalance ---------------------------------------------------------------------------------


def test_rebalance_moves_gpus_between_siblings(demo: Demo, admin) -> None:
    quota_rebalance(
        actor=admin,
        source=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        node_pool=demo.node_pool,
        gpu=8000,
    )
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (56, 72)
    assert tree_violations() == []


def test_rebalance_refuses_more_than_the_source_guarantees(demo: Demo, admin) -> None:
    err = refused(
        quota_rebalance,
        actor=admin,
        source=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        node_pool=demo.node_pool,
        gpu=81_000,
    )
    assert err.field == "gpu"
    assert err.message == "Quota 1.2 guarantees 80 GPUs on A100-80G; it cannot give 81 GPUs."


def test_rebalance_refuses_quotas_that_are_not_siblings(demo: Demo, admin) -> None:
    err = refused(
        quota_rebalance,
        actor=admin,
        source=demo.quotas["Quota 1"],
        target=demo.quotas["Quota 1.1"],
        node_pool=demo.node_pool,
        gpu=1000,
    )
    assert err.field == "target"
    assert err.message == (
        "Quota 1 and Quota 1.1 are not siblings: rebalance moves amounts between quotas of the "
        "same parent."
    )


def test_rebalance_refuses_the_same_quota_twice(demo: Demo, admin) -> None:
    q = demo.quotas["Quota 1.1"]
    err = refused(quota_rebalance, actor=admin, source=q, target=q, node_pool=demo.node_pool, gpu=1)
    assert err.message == "Rebalance needs two different quotas."


def test_rebalance_refuses_nothing_to_move(demo: Demo, admin) -> None:
    err = refused(
        quota_rebalance,
        actor=admin,
        source=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        node_pool=demo.node_pool,
    )
    assert err.message == "Give a positive amount to move."


def test_rebalance_refuses_to_push_the_target_over_its_max(demo: Demo, admin) -> None:
    quota_scale(
        actor=admin, quota=demo.quotas["Quota 1.1"], resources={demo.node_pool: gpus(48, 50)}
    )
    err = refused(
        quota_rebalance,
        actor=admin,
        source=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        node_pool=demo.node_pool,
        gpu=8000,
    )
    assert err.message == "Quota 1.1: max 50 GPUs on A100-80G is below its min 56 GPUs."


def test_rebalance_refuses_to_take_what_the_sources_children_hold(demo: Demo, admin) -> None:
    quota_create(
        actor=admin,
        name="Quota 1.2.1",
        resource_pool=demo.resource_pool,
        parent=demo.quotas["Quota 1.2"],
        resources={demo.node_pool: gpus(80)},
    )
    err = refused(
        quota_rebalance,
        actor=admin,
        source=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        node_pool=demo.node_pool,
        gpu=8000,
    )
    assert err.message == (
        "Quota 1.2 would guarantee 72 GPUs on A100-80G, but its children already hold "
        "80 GPUs (Quota 1.2.1 80 GPUs)."
    )


# --- optimistic versions -----------------------------------------------------------------------


def test_scale_with_a_stale_version_raises_stale_version(demo: Demo, admin) -> None:
    q = demo.quotas["Quota 1.1"]
    quota_scale(actor=admin, quota=q, resources={demo.node_pool: gpus(40)}, expected_version=1)
    err = refused(
        quota_scale, actor=admin, quota=q, resources={demo.node_pool: gpus(30)}, expected_version=1
    )
    assert isinstance(err, StaleVersion)
    assert err.field == "version"
    assert err.message == ("Quota 1.1 is at version 2, not 1: it changed since you loaded it.")


def test_toggle_and_update_with_a_stale_version_raise_stale_version(demo: Demo, admin) -> None:
    q = demo.quotas["Quota 1"]
    with pytest.raises(StaleVersion):
        quota_set_child_preemption(actor=admin, quota=q, enabled=False, expected_version=7)
    with pytest.raises(StaleVersion):
        quota_update(actor=admin, quota=q, name="Renamed", expected_version=7)
    assert Quota.objects.get(pk=q.pk).child_preemption is True


# --- audit -------------------------------------------------------------------------------------


def test_create_writes_an_audit_record(demo: Demo, admin) -> None:
    record = QuotaAudit.objects.get(quota=demo.quotas["Quota 1.1"])
    assert (record.action, record.actor, record.before) == ("create", admin, None)
    assert record.after["parent"] == "Quota 1"
    assert record.after["resources"]["A100-80G"]["min"]["gpu"] == 48_000


def test_scale_writes_an_audit_record_with_before_and_after(demo: Demo, admin) -> None:
    quota_scale(actor=admin, quota=demo.quotas["Quota 1.1"], resources={demo.node_pool: gpus(40)})
    record = QuotaAudit.objects.filter(quota=demo.quotas["Quota 1.1"]).first()
    assert record is not None
    assert (record.action, record.actor) == ("scale", admin)
    assert record.before["resources"]["A100-80G"]["min"]["gpu"] == 48_000
    assert record.after["resources"]["A100-80G"]["min"]["gpu"] == 40_000


def test_rebalance_audits_both_quotas(demo: Demo, admin) -> None:
    quota_rebalance(
        actor=admin,
        source=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        node_pool=demo.node_pool,
        gpu=8000,
    )
    records = QuotaAudit.objects.filter(action="rebalance").order_by("quota_name")
    assert [r.quota_name for r in records] == ["Quota 1.1", "Quota 1.2"]
    for r in records:
        assert r.actor == admin
        assert r.before["Quota 1.1"]["resources"]["A100-80G"]["min"]["gpu"] == 48_000
        assert r.after["Quota 1.1"]["resources"]["A100-80G"]["min"]["gpu"] == 56_000
        assert r.after["Quota 1.2"]["resources"]["A100-80G"]["min"]["gpu"] == 72_000


def test_toggle_writes_an_audit_record(demo: Demo, admin) -> None:
    q = quota_set_child_preemption(actor=admin, quota=demo.quotas["Quota 1"], enabled=False)
    assert (q.child_preemption, q.version) == (False, 2)
    record = QuotaAudit.objects.filter(quota=q).first()
    assert record is not None
    assert (record.action, record.actor) == ("toggle", admin)
    assert (record.before["child_preemption"], record.after["child_preemption"]) == (True, False)


def test_a_refused_change_writes_no_audit_record(demo: Demo, admin) -> None:
    count = QuotaAudit.objects.count()
    with pytest.raises(DomainError):
        quota_scale(
            actor=admin, quota=demo.quotas["Quota 1.1"], resources={demo.node_pool: gpus(56)}
        )
    assert QuotaAudit.objects.count() == count


def test_messages_call_a_quota_by_a_plain_name_quota_x(demo: Demo, admin) -> None:
    team = quota_create(
        actor=admin,
        name="team-a",
        resource_pool=demo.resource_pool,
        parent=demo.quotas["Quota 1.1"],
        resources={demo.node_pool: gpus(8)},
    )
    quota_create(
        actor=admin,
        name="team-a-dev",
        resource_pool=demo.resource_pool,
        parent=team,
        resources={demo.node_pool: gpus(8)},
    )
    err = refused(quota_delete, actor=admin, quota=team)
    assert err.message == "Quota team-a has child quotas (team-a-dev); delete them first."
