"""Reads of workspaces, always through the user's object permissions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.models import F, Prefetch, QuerySet
from guardian.models import GroupObjectPermission, UserObjectPermission
from guardian.shortcuts import get_objects_for_user

from console.permissions import is_platform_admin
from console.units import duration_text
from jobs.choices import ACTIVE_STATUSES, Kind
from jobs.models import Workload
from quotas.models import Quota, QuotaResource
from workspaces.choices import Role
from workspaces.models import Membership, ResourceUsageRule, Workspace, WorkspaceQuota
from workspaces.roles import VIEW


def workspaces_for_user(user: Any, perm: str = VIEW) -> QuerySet[Workspace]:
    """Workspaces the user holds `perm` on (all of them for platform admins)."""
    if is_platform_admin(user):
        return Workspace.objects.all()
    if not user.is_authenticated:
        return Workspace.objects.none()
    return get_objects_for_user(user, perm, klass=Workspace, accept_global_perms=True)


def visible_workspace_ids(user: Any) -> list[int] | None:
    """The ids ``workspaces_for_user(user, VIEW)`` lists, by id; None when it lists them all.

    One hand-written query (like ``WorkspaceAccess``'s): guardian's queryset, built and
    compiled by the ORM with its two content-type reads, cost a list request more CPU than
    the database spends answering it.
    """
    if is_platform_admin(user):
        return None
    if not user.is_authenticated:
        return []
    if user.has_perm(VIEW):  # granted globally: get_objects_for_user accepts it
        return None
    kind = ContentType.objects.get_for_model(Workspace)  # cached by Django
    codename = VIEW.split(".", 1)[1]
    with connection.cursor() as cursor:
        cursor.execute(_visible_sql(), [kind.pk, codename, user.pk] * 2)
        return [pk for (pk,) in cursor.fetchall()]


@cache
def _visible_sql() -> str:
    """Workspaces on which a permission is granted to a user, directly or through a group.

    As guardian's get_objects_for_user filters: the permission by content type and codename,
    the object by its pk as text. Parameters: content type, codename, user, twice.
    """
    workspaces = Workspace._meta.db_table
    granted = _grants_sql("o.object_pk", "o.content_type_id = %s AND p.codename = %s")
    return f"SELECT w.id FROM {workspaces} w WHERE CAST(w.id AS text) IN ({granted}) ORDER BY w.id"


def _grants_sql(column: str, condition: str) -> str:
    """`column` of guardian's object permissions meeting `condition` that a user holds,
    directly or through a group (``o`` the grant, ``p`` its permission); the user's id is a
    parameter after each half's `condition` parameters.
    """
    direct = UserObjectPermission._meta.db_table
    grouped = GroupObjectPermission._meta.db_table
    permission = Permission._meta.db_table
    members = get_user_model().groups.through._meta.db_table
    return (
        f"SELECT {column} FROM {direct} o JOIN {permission} p ON p.id = o.permission_id"
        f" WHERE {condition} AND o.user_id = %s"
        f" UNION SELECT {column} FROM {grouped} o JOIN {permission} p"
        " ON p.id = o.permission_id"
        f" JOIN {members} m ON m.group_id = o.group_id"
        f" WHERE {condition} AND m.user_id = %s"
    )


def user_has_workspace_perm(user: Any, perm: str, workspace: Workspace) -> bool:
    """True when the user holds `perm` on the workspace; platform admins hold every one."""
    return WorkspaceAccess(user).has_perm(perm, workspace)


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


def strictest(caps: Iterable[int | None]) -> int | None:
    """The smallest of several caps; None means no cap and loses to any number."""
    numbers = [c for c in caps if c is not None]
    return min(numbers) if numbers else None


@dataclass(frozen=True)
class UsableQuota:
    """A quota the user may submit to from the workspace, with the caps that bind them."""

    quota: Quota
    max_gpus: int | None
    max_priority: int | None


def usable_quotas(user: Any, workspace: Workspace) -> list[UsableQuota]:
    """Bound quotas the user's role may use from this workspace, with the strictest caps.

    Rules are an allow-list: a bound quota with no rule for the user's role is not usable.
    Several rules apply when a bound ancestor of the quota also has a rule for the role (a
    job counts against its quota and every ancestor); then the strictest cap wins. Platform
    admins who are not members act as workspace admins. Whether the user may submit at all
    (the submit permission) is for the caller to check.
    """
    if not user.is_authenticated:
        return []
    # (quota, max GPUs, max priority) per rule: a member's, or an admin's for a platform
    # admin who is not a member (they act as a workspace admin).
    rules = [
        (q, q.rule_max_gpus, q.rule_max_priority)  # type: ignore[attr-defined]
        for q in Quota.objects.raw(_member_rules_sql(), [workspace.pk, user.pk])
    ]
    if not rules:
        member = Membership.objects.filter(workspace=workspace, user=user)
        if member.exists() or not is_platform_admin(user):
            return []
        admin = ResourceUsageRule.objects.filter(
            workspace=workspace, quota__bindings__workspace=workspace, role=Role.ADMIN
        )
        rules = [
            (r.quota, r.max_gpus, r.max_priority)
            for r in admin.select_related("quota").order_by("quota__name")
        ]
    by_quota: dict[int, list[tuple[int | None, int | None]]] = {}
    quotas: dict[int, Quota] = {}
    for quota, max_gpus, max_priority in rules:
        by_quota.setdefault(quota.pk, []).append((max_gpus, max_priority))
        quotas[quota.pk] = quota
    if not by_quota:
        return []
    # Only another quota with a rule can be an ancestor that adds one.
    parents = (
        dict(Quota.objects.order_by().values_list("id", "parent_id")) if len(by_quota) > 1 else {}
    )
    result = []
    for qid in by_quota:
        applied = list(by_quota[qid])
        ancestor = parents.get(qid)
        while ancestor is not None:
            applied.extend(by_quota.get(ancestor, ()))
            ancestor = parents.get(ancestor)
        result.append(
            UsableQuota(
                quota=quotas[qid],
                max_gpus=strictest(gpus for gpus, _ in applied),
                max_priority=strictest(priority for _, priority in applied),
            )
        )
    return result


@cache
def _member_rules_sql() -> str:
    """A member's Resource Usage rules on the workspace's bound quotas, each with its quota.

    Written by hand, as _object_perms_sql: built by the ORM (joins, the role as a subquery,
    select_related) it cost three times the CPU, on every submit. Parameters: workspace,
    user. Columns: the quota's, then the rule's caps as rule_max_gpus and rule_max_priority.
    """
    qn = connection.ops.quote_name
    columns = ", ".join(f"q.{qn(str(f.column))}" for f in Quota._meta.concrete_fields)
    return (
        f"SELECT {columns}, r.max_gpus AS rule_max_gpus, r.max_priority AS rule_max_priority"
        f" FROM {qn(ResourceUsageRule._meta.db_table)} r"
        f" JOIN {qn(Quota._meta.db_table)} q ON q.id = r.quota_id"
        f" JOIN {qn(WorkspaceQuota._meta.db_table)} b"
        " ON b.workspace_id = r.workspace_id AND b.quota_id = r.quota_id"
        f" JOIN {qn(Membership._meta.db_table)} m"
        " ON m.workspace_id = r.workspace_id AND m.role = r.role"
        " WHERE r.workspace_id = %s AND m.user_id = %s ORDER BY q.name"
    )


@cache
def _object_perms_sql() -> str:
    """The codenames guardian grants a user on one object, directly or through a group.

    Written by hand: the same query built by the ORM (two querysets and their union) cost
    more CPU than the database spends answering it, on every submit. Parameters: content
    type, object pk, user, twice.
    """
    return _grants_sql("p.codename", "o.content_type_id = %s AND o.object_pk = %s")


class WorkspaceAccess:
    """One user's workspace permissions and usable quotas, each read once per workspace.

    For the checks of one request (a submit checks visibility, the submit permission and the
    usage rules): make it inside the transaction that writes, so what it read is current.
    """

    def __init__(self, user: Any) -> None:
        self.user = user
        self._perms: dict[int, set[str]] = {}
        self._usable: dict[int, list[UsableQuota]] = {}
        self._admin: bool | None = None

    def has_perm(self, perm: str, workspace: Workspace) -> bool:
        """True when the user holds `perm` on the workspace; platform admins hold every one."""
        # The object permission first: a member's check then never reads the global ones.
        if self._object_perm(perm, workspace):
            return True
        if self._admin is None:
            self._admin = is_platform_admin(self.user)
        return self._admin

    def _object_perm(self, perm: str, workspace: Workspace) -> bool:
        """guardian's ObjectPermissionChecker.has_perm, reading both grants in one query.

        An inactive or anonymous user holds none, a superuser every one; otherwise the
        permission is granted to the user on the workspace or to one of their groups.
        """
        user = self.user
        if not user.is_authenticated or not user.is_active:
            return False
        if user.is_superuser:
            return True
        if workspace.pk not in self._perms:
            kind = ContentType.objects.get_for_model(Workspace)  # cached by Django
            with connection.cursor() as cursor:
                cursor.execute(_object_perms_sql(), [kind.pk, str(workspace.pk), user.pk] * 2)
                self._perms[workspace.pk] = {codename for (codename,) in cursor.fetchall()}
        return perm.split(".", 1)[-1] in self._perms[workspace.pk]

    def sees(self, workspace: Workspace) -> bool:
        """True when the workspace is among ``workspaces_for_user(user, VIEW)``."""
        # get_objects_for_user also accepts the permission granted globally.
        return self.has_perm(VIEW, workspace) or bool(
            self.user.is_authenticated and self.user.has_perm(VIEW)
        )

    def usable_quotas(self, workspace: Workspace) -> list[UsableQuota]:
        """``usable_quotas`` of the user in the workspace."""
        if workspace.pk not in self._usable:
            self._usable[workspace.pk] = usable_quotas(self.user, workspace)
        return self._usable[workspace.pk]
