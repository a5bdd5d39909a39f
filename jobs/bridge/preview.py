"""Scale previews: which running workloads a smaller min would leave Not in Quota."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from cluster.models import NodePool
from console.errors import DomainError
from jobs.bridge.snapshot import build
from jobs.models import Workload
from jobs.scheduling import types as core
from jobs.scheduling.classify import classify
from quotas.amounts import Amounts
from quotas.models import Quota


def scale_preview(
    quota: Quota, resources: Mapping[NodePool, Amounts], *, now: datetime
) -> list[Workload]:
    """Running workloads that would become Not in Quota if the quota were scaled so."""
    snap = build(now)
    quotas = []
    for q in snap.snapshot.quotas:
        if q.name == quota.name:
            mins = dict(q.min)
            for node_pool, a in resources.items():
                mins[node_pool.name] = core.Resources(a.min_gpu, a.min_cpu, a.min_memory)
            q = replace(q, min=mins)
        quotas.append(q)
    try:
        before = classify(snap.snapshot)
        after = classify(replace(snap.snapshot, quotas=tuple(quotas)))
    except core.ScenarioError as error:
        raise DomainError(str(error), field="min_gpu") from None
    return [
        snap.workloads[name].workload for name, ok in before.items() if ok and not after.get(name)
    ]
