"""Random sequences of quota changes never break the tree's sums nor let a child allow a node
pool its parent does not (or guarantee one it may not use); a refused change writes nothing.

The invariants are checked from the rows (tests.quotas.builders.tree_violations), not by the
service code under test. Each example runs in its own savepoint, rolled back at the end, so
every example starts from the demo tree.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cluster.models import NodePool
from console.demo import Demo
from console.errors import DomainError
from quotas.amounts import Amounts
from quotas.models import Quota, QuotaAudit
from quotas.services.quotas import (
    quota_create,
    quota_delete,
    quota_rebalance,
    quota_scale_outcome,
    quota_update,
)
from tests.quotas.builders import add_t4, dump, tree_violations

pytestmark = pytest.mark.django_db

# Milli-GPUs around the demo's numbers (48, 80, 128 GPUs), fractions and just-too-much included.
GPU = st.sampled_from([0, 500, 1000, 7500, 8000, 16_000, 48_000, 56_000, 80_000, 128_000, 129_000])
PICK = st.integers(min_value=0, max_value=50)

OPS = st.one_of(
    st.tuples(st.just("create"), PICK, GPU),
    st.tuples(st.just("scale"), PICK, GPU, st.none() | GPU),
    st.tuples(st.just("rebalance"), PICK, PICK, GPU),
    st.tuples(st.just("delete"), PICK),
    st.tuples(st.just("scale_t4"), PICK, st.sampled_from([0, 2000, 4000])),
    st.tuples(st.just("restrict"), PICK, st.sampled_from(["", "A100-80G", "T4", "A100-80G T4"])),
)


def _apply(op: tuple[Any, ...], demo: Demo, admin: Any, serial: int) -> int:
    """Run one operation on quotas picked by index; return the audit records it should write."""
    quotas = list(Quota.objects.order_by("pk"))
    kind = op[0]
    if kind == "create":
        _, pick, gpu = op
        parent = None if pick % (len(quotas) + 1) == len(quotas) else quotas[pick % len(quotas)]
        quota_create(
            actor=admin,
            name=f"Q{serial}",
            resource_pool=demo.resource_pool,
            parent=parent,
            resources={demo.node_pool: Amounts(min_gpu=gpu)},
        )
        return 1
    if kind == "scale":
        _, pick, gpu, limit = op
        # A scale to the amounts the quota has writes nothing, no audit record either.
        return int(
            quota_scale_outcome(
                actor=admin,
                quota=quotas[pick % len(quotas)],
                resources={demo.node_pool: Amounts(min_gpu=gpu, max_gpu=limit)},
            ).changed
        )
    if kind == "rebalance":
        _, pick, other, gpu = op
        source = quotas[pick % len(quotas)]
        # Prefer a sibling so most rebalances get past the sibling check.
        siblings = [q for q in quotas if q.parent_id == source.parent_id and q.pk != source.pk]
        target = siblings[other % len(siblings)] if siblings else quotas[other % len(quotas)]
        quota_rebalance(
            actor=admin, source=source, target=target, node_pool=demo.node_pool, gpu=gpu
        )
        return 2
    if kind == "scale_t4":
        _, pick, gpu = op
        t4 = NodePool.objects.get(name="T4")
        return int(
            quota_scale_outcome(
                actor=admin, quota=quotas[pick % len(quotas)], resources={t4: Amounts(min_gpu=gpu)}
            ).changed
        )
    if kind == "restrict":
        _, pick, names = op
        pools = list(NodePool.objects.filter(name__in=names.split()))
        quota_update(actor=admin, quota=quotas[pick % len(quotas)], allowed_node_pools=pools)
        return 1
    _, pick = op
    quota_delete(actor=admin, quota=quotas[pick % len(quotas)])
    return 1


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(OPS, min_size=1, max_size=12))
def test_random_changes_keep_the_tree_sound_and_refusals_write_nothing(
    demo: Demo, admin: Any, ops: list[tuple[Any, ...]]
) -> None:
    with transaction.atomic():
        add_t4(demo)
        for serial, op in enumerate(ops):
            before = dump()
            try:
                records = _apply(op, demo, admin, serial)
            except DomainError:
                event(f"{op[0]} refused")
                assert dump() == before, f"refused {op} changed rows"
            else:
                event(f"{op[0]} done")
                assert QuotaAudit.objects.count() == before["audit"] + records, op
                if not records:
                    assert dump() == before, f"unchanged {op} wrote rows"
            assert tree_violations() == [], f"after {op}"
        transaction.set_rollback(True)


def test_the_independent_checker_sees_broken_sums(demo: Demo) -> None:
    from quotas.models import QuotaResource

    QuotaResource.objects.filter(quota__name="Quota 1.1").update(min_gpu=56_000)
    QuotaResource.objects.filter(quota__name="Quota 1").update(min_gpu=129_000, max_gpu=100_000)
    assert tree_violations() == [
        "Quota 1 max gpu below min",
        "roots hold 129000 gpu > capacity 128000",
        "children of Quota 1 hold 136000 gpu",
    ]


def test_the_independent_checker_sees_a_child_wider_than_its_parent(demo: Demo) -> None:
    t4 = add_t4(demo)
    demo.quotas["Quota 1"].allowed_node_pools.set([t4])
    demo.quotas["Quota 1.1"].allowed_node_pools.set([demo.node_pool])
    assert tree_violations() == [
        "Quota 1 guarantees a node pool it may not use",
        "Quota 1.1 allows a node pool its parent does not",
        "Quota 1.1 guarantees a node pool it may not use",
        "Quota 1.2 guarantees a node pool it may not use",
    ]
