"""Reads the quota API needs beyond the selectors: live usage in the list's one query."""

from __future__ import annotations

from typing import Any

from django.db.models import F, IntegerField, OuterRef, Prefetch, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from jobs.choices import LIVE_POD_STATUSES, WAITING_STATUSES
from jobs.models import Pod, Workload
from quotas.models import Quota, QuotaResource


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
