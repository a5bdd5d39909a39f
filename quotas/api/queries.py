"""Reads the quota API needs beyond the selectors: live usage and the scale preview."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, IntegerField, OuterRef, Prefetch, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from jobs.bridge import build
from jobs.choices import LIVE_POD_STATUSES, WAITING_STATUSES
from jobs.models import Pod, Workload
from jobs.scheduling.classify import classify
from quotas.amounts import Amounts
from quotas.models import NodePool, Quota, QuotaResource
from quotas.services.quotas import quota_scale


def _total(queryset: QuerySet[Any], group: str, amount: Any) -> Coalesce:
    """One correlated aggregate per quota row, 0 when there is nothing."""
    summed = queryset.values(group).annotate(total=Sum(amount)).values("total")[:1]
    return Coalesce(Subquery(summed, output_field=IntegerField()), 0)


def quotas_with_usage(queryset: QuerySet[Quota]) -> QuerySet[Quota]:
    """Quotas with their amounts and live usage (milli-GPU) inside the page's one query.

    In Quota and borrowed count the live pods of workloads submitted directly to the quota;
    pending counts its waiting workloads' requests.
    """
    live = Pod.objects.filter(workload__quota=OuterRef("pk"), status__in=LIVE_POD_STATUSES)
    waiting = Workload.objects.filter(quota=OuterRef("pk"), status__in=WAITING_STATUSES)
    return (
        queryset.select_related("parent", "resource_pool")
        .prefetch_related(
            Prefetch("resources", queryset=QuotaResource.objects.select_related("node_pool"))
        )
        .annotate(
            usage_in_quota=_total(live.filter(borrowed=False), "workload__quota", "workload__gpu"),
            usage_borrowed=_total(live.filter(borrowed=True), "workload__quota", "workload__gpu"),
            usage_pending=_total(waiting, "quota", F("gpu") * F("replicas")),
        )
    )


@dataclass(frozen=True)
class ScalePreview:
    """Running workloads whose label the proposed amounts would flip."""

    not_in_quota: list[Workload]
    in_quota: list[Workload]


class _Rollback(Exception):
    """Undo the trial scale."""


def scale_preview(
    *, actor: Any, quota: Quota, resources: Mapping[NodePool, Amounts], now: datetime
) -> ScalePreview:
    """Classify the running workloads now and as if the quota had the proposed amounts.

    The trial runs quota_scale in a savepoint that is rolled back, so a proposal the service
    would refuse is refused here with the same message, and the second snapshot sees the
    proposed min in place of the current one.
    """
    current = classify(build(now).snapshot)
    proposed: dict[str, bool] = {}
    workloads: dict[str, Workload] = {}
    try:
        with transaction.atomic():
            quota_scale(actor=actor, quota=quota, resources=resources)
            bridge = build(now)
            proposed = classify(bridge.snapshot)
            workloads = bridge.workloads
            raise _Rollback
    except _Rollback:
        pass
    leaving = [workloads[n] for n, ok in proposed.items() if current.get(n) and not ok]
    joining = [workloads[n] for n, ok in proposed.items() if ok and current.get(n) is False]
    return ScalePreview(not_in_quota=leaving, in_quota=joining)
