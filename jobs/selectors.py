"""Reads of workloads, always through the workspaces the user may see."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404

from jobs.choices import LIVE_POD_STATUSES
from jobs.models import Pod, Workload
from workspaces.selectors import workspaces_for_user


def workloads_for_user(user: Any) -> QuerySet[Workload]:
    """Workloads of every workspace the user may view (all for platform admins)."""
    return Workload.objects.filter(workspace__in=workspaces_for_user(user))


def workload_list(queryset: QuerySet[Workload]) -> QuerySet[Workload]:
    """A list-ready queryset: related rows and live-pod counts in a fixed number of queries."""
    return queryset.select_related("workspace", "quota", "owner").annotate(
        live_pods=Count("pods", filter=Q(pods__status__in=LIVE_POD_STATUSES))
    )


def workload_for_user(user: Any, pk: int) -> Workload:
    """One workload the user may view, with pods and events; 404 when they may not."""
    workload = (
        workloads_for_user(user)
        .select_related("workspace", "quota", "owner")
        .prefetch_related(
            "node_pools",
            "events",
            "scaling_rules",
            Prefetch(
                "pods", queryset=Pod.objects.select_related("node").order_by("index", "attempt")
            ),
        )
        .filter(pk=pk)
        .first()
    )
    if workload is None:
        raise Http404("No such workload.")
    return workload
