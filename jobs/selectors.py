"""Reads of workloads; pages resolve the workspace through the user's Access first."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NamedTuple

from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404

from jobs.choices import LIVE_POD_STATUSES
from jobs.models import Pod, Workload


def workload_list(queryset: QuerySet[Workload]) -> QuerySet[Workload]:
    """A list-ready queryset: related rows and live-pod counts in a fixed number of queries."""
    return queryset.select_related("workspace", "quota", "owner").annotate(
        live_pods=Count("pods", filter=Q(pods__status__in=LIVE_POD_STATUSES))
    )


def workspace_workloads(workspace: Any, kind: str) -> QuerySet[Workload]:
    """One kind of workload of a workspace (the caller has already resolved the workspace)."""
    return Workload.objects.filter(workspace=workspace, kind=kind)


def workload_page(queryset: QuerySet[Workload]) -> QuerySet[Workload]:
    """workload_list plus each row's pods in one more query, for pages that show pod states."""
    pods = Pod.objects.only(
        "id", "workload_id", "index", "attempt", "status", "borrowed", "node_id", "reason"
    ).order_by("index", "attempt")
    return workload_list(queryset).prefetch_related(Prefetch("pods", queryset=pods))


def workload_in_workspace(workspace: Any, pk: int, kind: str | None = None) -> Workload:
    """One workload of this workspace (and kind), with pods and events; 404 otherwise.

    The workspace is one the page's Access let the user view (workspaces.pages).
    """
    pods = Pod.objects.select_related("node").order_by("index", "attempt")
    workloads = Workload.objects.filter(workspace=workspace, pk=pk)
    if kind is not None:
        workloads = workloads.filter(kind=kind)
    workload = (
        workloads.select_related("workspace", "quota", "owner")
        .prefetch_related("node_pools", "events", "scaling_rules", Prefetch("pods", queryset=pods))
        .first()
    )
    if workload is None:
        raise Http404("No such workload in this workspace.")
    return workload


def workload_owners(workspace: Any, kind: str) -> list[tuple[int, str]]:
    """(id, username) of everyone who owns a workload of this kind here, by username."""
    rows = (
        Workload.objects.filter(workspace=workspace, kind=kind)
        .values_list("owner_id", "owner__username")
        .distinct()
        .order_by("owner__username")
    )
    return list(rows)


def workload_rows(queryset: QuerySet[Workload], start: int, stop: int) -> list[Workload]:
    """One page of an ordered queryset, list-ready (workload_page) in two more queries.

    The page's ids come first from a plain ordered query, so the live-pod count of
    workload_list is grouped over those rows only, not over every row that matches.
    """
    ids = list(queryset.values_list("pk", flat=True)[start:stop])
    found = {w.pk: w for w in workload_page(Workload.objects.filter(pk__in=ids))}
    return [found[pk] for pk in ids if pk in found]


class PodState(NamedTuple):
    """What a list row reads of a pod."""

    attempt: int
    status: str


def job_rows(
    queryset: QuerySet[Workload], start: int, stop: int
) -> list[tuple[Workload, list[PodState]]]:
    """One page of an ordered queryset with each row's pod states, in three queries.

    As workload_rows, but the pods come as plain (attempt, status) rows: a prefetch builds a
    queryset and a model per pod, most of a 50-row page's time at 10,000 jobs.
    """
    ids = list(queryset.values_list("pk", flat=True)[start:stop])
    found = Workload.objects.filter(pk__in=ids).select_related("workspace", "quota", "owner")
    by_id = {w.pk: w for w in found}
    pods: dict[int, list[PodState]] = {pk: [] for pk in ids}
    rows = Pod.objects.filter(workload_id__in=ids).order_by("index", "attempt")
    for workload_id, attempt, status in rows.values_list("workload_id", "attempt", "status"):
        pods[workload_id].append(PodState(attempt, status))
    return [(by_id[pk], pods[pk]) for pk in ids if pk in by_id]


def borrowed_nodes(workload_ids: Collection[int]) -> dict[int, set[str]]:
    """Per workload, the nodes its borrowed pods are or were on (what members may not read)."""
    if not workload_ids:
        return {}
    found: dict[int, set[str]] = {}
    rows = Pod.objects.filter(workload_id__in=workload_ids, borrowed=True, node__isnull=False)
    for workload_id, node in rows.order_by().values_list("workload_id", "node__name").distinct():
        found.setdefault(workload_id, set()).add(node)
    return found


def training_choices() -> dict[str, list[tuple[int, str]]]:
    """The All jobs page's filter choices: (id, name) of every workspace, quota and active
    user (3 small queries, none over the jobs)."""
    from django.contrib.auth import get_user_model

    from quotas.models import Quota
    from workspaces.models import Workspace

    # Every user, not only those who own a job: a semi-join over all the jobs cost more than
    # the rest of the page's queries together at 10,000 jobs, and users are few.
    owners = get_user_model().objects.filter(is_active=True)
    return {
        "workspaces": list(Workspace.objects.order_by("name").values_list("pk", "name")),
        "quotas": list(Quota.objects.order_by("name").values_list("pk", "name")),
        "owners": list(owners.order_by("username").values_list("pk", "username")),
    }
