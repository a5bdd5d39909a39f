"""Reads of workspaces; who may see or use one is workspaces.access's to answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import F, Prefetch, QuerySet

from console.units import duration_text
from jobs.choices import ACTIVE_STATUSES, Kind
from jobs.models import Workload
from quotas.models import Quota, QuotaResource
from workspaces.choices import Role
from workspaces.models import Membership, ResourceUsageRule, Workspace


def workspace_role(user: Any, workspace: Workspace) -> str | None:
    """The user's role in the workspace, None when not a member."""
    if not user.is_authenticated:
        return None
    return (
        Membership.objects.filter(workspace=workspace, user=user)
        .values_list("role", flat=True)
        .first()
    )


def workspace_members(workspace: Workspace) -> QuerySet[Membership]:
    """Members with their users, by username."""
    return Membership.objects.filter(workspace=workspace).select_related("user")


@dataclass
class BoundQuota:
    """A quota bound to the workspace with its GPUs per node pool (milli-GPU)."""

    quota: Quota
    min_gpu: dict[str, int] = field(default_factory=dict)
    max_gpu: dict[str, int | None] = field(default_factory=dict)
    roles: list[str] = field(default_factory=list)

    @property
    def total_min_gpu(self) -> int:
        """Guaranteed GPUs over every node pool."""
        return sum(self.min_gpu.values())


def workspace_quotas(workspace: Workspace) -> list[BoundQuota]:
    """Bound quotas with GPUs and the roles that may use them (a fixed number of queries)."""
    quotas = Quota.objects.filter(bindings__workspace=workspace).prefetch_related(
        Prefetch("resources", queryset=QuotaResource.objects.select_related("node_pool")),
        Prefetch(
            "usage_rules",
            queryset=ResourceUsageRule.objects.filter(workspace=workspace),
            to_attr="workspace_rules",
        ),
    )
    result = []
    order = {r: i for i, r in enumerate(Role.values)}
    for quota in quotas.order_by("name"):
        bound = BoundQuota(quota)
        for row in quota.resources.all():
            bound.min_gpu[row.node_pool.name] = row.min_gpu
            bound.max_gpu[row.node_pool.name] = row.max_gpu
        bound.roles = sorted((r.role for r in quota.workspace_rules), key=order.__getitem__)
        result.append(bound)
    return result


@dataclass(frozen=True)
class InstanceLimits:
    """A workspace's interactive time limits in seconds; None: no default, no cap."""

    default: int | None
    maximum: int | None

    def __str__(self) -> str:
        """As the pages say it: "default 2 h, at most 8 h"."""
        if self.default is None and self.maximum is None:
            return "none"
        default = "no default" if self.default is None else f"default {duration_text(self.default)}"
        cap = "no maximum" if self.maximum is None else f"at most {duration_text(self.maximum)}"
        return f"{default}, {cap}"


def instance_limits(workspace: Workspace) -> InstanceLimits:
    """The time limits of the workspace as loaded (no query)."""
    return InstanceLimits(workspace.instance_default_duration, workspace.instance_max_duration)


def active_instances(workspace: Workspace, *, limit: int = 200) -> list[Workload]:
    """The workspace's queued and running interactive instances with their owners, longest
    time limit first: those a lower maximum would shorten come first."""
    rows = (
        Workload.objects.filter(
            workspace=workspace, kind=Kind.INTERACTIVE, status__in=ACTIVE_STATUSES
        )
        .select_related("owner")
        .order_by(F("max_duration").desc(nulls_first=True), "name")
    )
    return list(rows[:limit])


def workspace_usage_rules(workspace: Workspace) -> QuerySet[ResourceUsageRule]:
    """The workspace's resource-usage rules, by quota then role."""
    return ResourceUsageRule.objects.filter(workspace=workspace).select_related("quota")
