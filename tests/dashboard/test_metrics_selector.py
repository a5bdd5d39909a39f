"""Which node pool a waiting workload's demand is counted under on /metrics."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from cluster.models import NodePool
from dashboard.selectors.metrics import ANY_POOL, quota_figures
from jobs.choices import Kind, Status
from jobs.models import Workload

from .factories import T0

pytestmark = pytest.mark.django_db


def _waiting(demo: Any, name: str, pools: list[NodePool]) -> Workload:
    workload = Workload.objects.create(
        workspace=demo.workspaces["workspace_b"],
        quota=demo.quotas["Quota 1.1"],
        owner=get_user_model().objects.get(username="bob"),
        name=name,
        kind=Kind.TRAINING,
        status=Status.QUEUED,
        gpu=2000,
        replicas=3,
        submitted_at=T0,
    )
    workload.node_pools.set(pools)
    return workload


@pytest.mark.parametrize(
    ("named", "pool"),
    [(["A100-80G"], "A100-80G"), ([], "A100-80G"), (["A100-80G", "T4"], ANY_POOL)],
    ids=["one-pool", "none-named-quota-has-one", "several"],
)
def test_waiting_demand_is_counted_under_its_pool_or_any(
    demo: Any, named: list[str], pool: str
) -> None:
    t4 = NodePool.objects.create(resource_pool=demo.resource_pool, name="T4", gpu_model="T4")
    pools = {"A100-80G": demo.node_pool, "T4": t4}
    _waiting(demo, "wait", [pools[n] for n in named])
    figures = quota_figures()
    for quota in ("Quota 1.1", "Quota 1"):  # its quota and every ancestor
        pk = demo.quotas[quota].pk
        assert figures.pools[pk][pool].pending[0] == 6000
        assert figures.pools[pk][pool].waiting == 1
    assert demo.quotas["Quota 1.2"].pk not in {
        pk for pk, rows in figures.pools.items() if any(r.waiting for r in rows.values())
    }
