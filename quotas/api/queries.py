"""Reads the quota API needs beyond the selectors: amounts with the page, live usage per subtree."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import F, Prefetch, QuerySet, Sum

from jobs.choices import LIVE_POD_STATUSES, WAITING_STATUSES
from jobs.models import Pod, Workload
from quotas.models import Quota, QuotaResource


def quotas_with_amounts(queryset: QuerySet[Quota]) -> QuerySet[Quota]:
    """Quotas with their parent, resource pool, amounts per node pool and allowed node pools
    in the page's queries."""
    return queryset.select_related("parent", "resource_pool").prefetch_related(
        Prefetch("resources", queryset=QuotaResource.objects.select_related("node_pool")),
        "allowed_node_pools",
    )


def subtree_usage() -> dict[int, tuple[int, int, int]]:
    """(In Quota, borrowed, pending) milli-GPU of every quota's subtree (3 queries).

    A workload counts against its quota and every ancestor (DESIGN's hierarchical rule), so a
    parent's usage includes its children's. In Quota and borrowed count live pods; pending
    counts the requests of waiting workloads.
    """
    parent: dict[int, int | None] = dict(Quota.objects.values_list("pk", "parent_id"))
    own: dict[int, list[int]] = {pk: [0, 0, 0] for pk in parent}
    live: Any = (
        Pod.objects.filter(status__in=LIVE_POD_STATUSES)
        .values_list("workload__quota_id", "borrowed")
        .annotate(gpu=Sum("workload__gpu"))
        .order_by()
    )
    for quota_id, borrowed, gpu in live:
        own[quota_id][1 if borrowed else 0] += gpu or 0
    waiting: Any = (
        Workload.objects.filter(status__in=WAITING_STATUSES)
        .values_list("quota_id")
        .annotate(gpu=Sum(F("gpu") * F("replicas")))
        .order_by()
    )
    for quota_id, gpu in waiting:
        own[quota_id][2] += gpu or 0
    total: dict[int, list[int]] = {pk: [0, 0, 0] for pk in parent}
    for pk, amounts in own.items():
        node: int | None = pk
        while node is not None:
            row = total[node]
            for i, amount in enumerate(amounts):
                row[i] += amount
            node = parent[node]
    return {pk: (row[0], row[1], row[2]) for pk, row in total.items()}


def attach_usage(quotas: Iterable[Quota]) -> None:
    """Set usage_in_quota, usage_borrowed and usage_pending on each quota for the serializer."""
    usage = subtree_usage()
    for quota in quotas:
        in_quota, borrowed, pending = usage.get(quota.pk, (0, 0, 0))
        # read by UsageSerializer; not model fields
        setattr(quota, "usage_in_quota", in_quota)  # noqa: B010
        setattr(quota, "usage_borrowed", borrowed)  # noqa: B010
        setattr(quota, "usage_pending", pending)  # noqa: B010
