"""One authority for "may this user view, submit in or manage this workspace, with which quotas".

The rule is guardian's: a permission granted to the user on the workspace, or to one of their
groups; plus a permission granted globally (as ``get_objects_for_user(...,
accept_global_perms=True)`` accepts it) and platform admins, who hold every permission on
every workspace. An inactive or anonymous user holds none.

Each surface builds one ``Access`` per request (the API's base viewset, the workspace page
mixin, the websocket consumer's ``connect``) and hands it to the services. It reads the user's
grants on the first question, in one query, and answers every later one from that read: make
the first ask inside the transaction that writes, so what it checked is what the write sees.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Model, QuerySet
from guardian.models import GroupObjectPermission, UserObjectPermission

from console.permissions import is_platform_admin
from quotas.models import Quota
from workspaces.choices import Role
from workspaces.models import Membership, ResourceUsageRule, Workspace, WorkspaceQuota
from workspaces.roles import VIEW


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


class Access:
    """One user's permissions on every workspace and usable quotas, each read once."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self._usable: dict[int, list[UsableQuota]] = {}

    @cached_property
    def platform_admin(self) -> bool:
        """Holds the cluster-wide permission: every permission on every workspace."""
        return is_platform_admin(self.user)

    @cached_property
    def _grants(self) -> dict[int, frozenset[str]]:
        """Codenames granted on each workspace to the user or their groups, in one query."""
        user = self.user
        if not user.is_authenticated or not user.is_active:
            return {}
        kind = ContentType.objects.get_for_model(Workspace)  # cached by Django
        found: dict[int, set[str]] = {}
        with connection.cursor() as cursor:
            cursor.execute(_grants_sql(), [kind.pk, user.pk] * 2)
            for pk, codename in cursor.fetchall():
                if pk.isdigit():  # guardian keeps object pks as text
                    found.setdefault(int(pk), set()).add(codename)
        return {pk: frozenset(codenames) for pk, codenames in found.items()}

    def _global(self, perm: str) -> bool:
        """Holds `perm` on every workspace: a platform admin, or granted it globally."""
        if self.platform_admin:
            return True
        return bool(self.user.is_authenticated and self.user.has_perm(perm))

    def has_perm(self, perm: str, workspace: Workspace | int) -> bool:
        """True when the user holds `perm` ("workspaces.submit_workspace") on the workspace."""
        pk = workspace if isinstance(workspace, int) else workspace.pk
        # The grants first: a member's answer then never reads the global permissions.
        if perm.split(".", 1)[-1] in self._grants.get(pk, ()):
            return True
        return self._global(perm)

    def require(self, perm: str, workspace: Workspace) -> None:
        """Refuse (PermissionDenied: 403) unless the user holds `perm` on the workspace."""
        if not self.has_perm(perm, workspace):
            raise PermissionDenied(
                f"You may not do this in workspace {workspace.name} (needs {perm.split('.')[-1]})."
            )

    def visible_ids(self) -> list[int] | None:
        """Ids of the workspaces the user may view, ascending; None when they may view all."""
        if self._global(VIEW):
            return None
        codename = VIEW.split(".", 1)[1]
        return sorted(pk for pk, granted in self._grants.items() if codename in granted)

    def restrict(self, queryset: QuerySet[Any], path: str = "") -> QuerySet[Any]:
        """Only the rows of workspaces the user may view; `path` leads from a row to its
        workspace ("" when the rows are workspaces)."""
        ids = self.visible_ids()
        if ids is None:
            return queryset
        return queryset.filter(**{f"{path}__in" if path else "pk__in": ids})

    def workspaces(self) -> QuerySet[Workspace]:
        """The workspaces the user may view."""
        return self.restrict(Workspace.objects.all())

    def usable_quotas(self, workspace: Workspace) -> list[UsableQuota]:
        """Bound quotas the user's role may use from this workspace, with the strictest caps.

        Rules are an allow-list: a bound quota with no rule for the user's role is not
        usable. Several rules apply when a bound ancestor of the quota also has a rule for
        the role (a job counts against its quota and every ancestor); then the strictest cap
        wins. Platform admins who are not members act as workspace admins. Whether the user
        may submit at all is ``has_perm(SUBMIT, …)``.
        """
        if workspace.pk not in self._usable:
            self._usable[workspace.pk] = self._read_usable(workspace)
        return self._usable[workspace.pk]

    def _read_usable(self, workspace: Workspace) -> list[UsableQuota]:
        """``usable_quotas``, read now."""
        user = self.user
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
            if not self.platform_admin or member.exists():
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
            dict(Quota.objects.order_by().values_list("id", "parent_id"))
            if len(by_quota) > 1
            else {}
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


def _table(model: type[Model]) -> str:
    """A model's table, quoted for the database."""
    return connection.ops.quote_name(model._meta.db_table)


@cache
def _grants_sql() -> str:
    """(object pk, codename) of every permission guardian grants a user on one model's
    objects, directly or through a group. Parameters: content type, user, twice.

    Written by hand: guardian's queryset, built and compiled by the ORM, cost a list request
    more CPU than the database spends answering it.
    """
    permission = _table(Permission)
    members = _table(get_user_model().groups.through)
    grant = "o.content_type_id = %s AND p.content_type_id = o.content_type_id"
    return (
        f"SELECT o.object_pk, p.codename FROM {_table(UserObjectPermission)} o"
        f" JOIN {permission} p ON p.id = o.permission_id"
        f" WHERE {grant} AND o.user_id = %s"
        f" UNION SELECT o.object_pk, p.codename FROM {_table(GroupObjectPermission)} o"
        f" JOIN {permission} p ON p.id = o.permission_id"
        f" JOIN {members} m ON m.group_id = o.group_id"
        f" WHERE {grant} AND m.user_id = %s"
    )


@cache
def _member_rules_sql() -> str:
    """A member's Resource Usage rules on the workspace's bound quotas, each with its quota.

    Written by hand, as _grants_sql: built by the ORM (joins, the role as a subquery,
    select_related) it cost three times the CPU, on every submit. Parameters: workspace,
    user. Columns: the quota's, then the rule's caps as rule_max_gpus and rule_max_priority.
    """
    qn = connection.ops.quote_name
    columns = ", ".join(f"q.{qn(str(f.column))}" for f in Quota._meta.concrete_fields)
    return (
        f"SELECT {columns}, r.max_gpus AS rule_max_gpus, r.max_priority AS rule_max_priority"
        f" FROM {_table(ResourceUsageRule)} r"
        f" JOIN {_table(Quota)} q ON q.id = r.quota_id"
        f" JOIN {_table(WorkspaceQuota)} b"
        " ON b.workspace_id = r.workspace_id AND b.quota_id = r.quota_id"
        f" JOIN {_table(Membership)} m"
        " ON m.workspace_id = r.workspace_id AND m.role = r.role"
        " WHERE r.workspace_id = %s AND m.user_id = %s ORDER BY q.name"
    )
