"""Create workspaces, bind quotas, manage members and resource-usage rules."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from guardian.shortcuts import assign_perm, remove_perm

from console.errors import DomainError
from quotas.models import Quota
from workspaces.choices import Role
from workspaces.models import Membership, ResourceUsageRule, Workspace, WorkspaceQuota
from workspaces.roles import ALL_PERMISSIONS, ROLE_PERMISSIONS

_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
# Names that would shadow a page under /workspaces/.
RESERVED_NAMES = frozenset({"new"})


@transaction.atomic
def workspace_create(*, name: str, description: str = "") -> Workspace:
    """Create an empty workspace for one team."""
    name = name.strip()
    if not name:
        raise DomainError("A workspace needs a name.", field="name")
    if not _SLUG.fullmatch(name):
        raise DomainError(
            f"Workspace name {name!r} may hold only letters, digits, - and _.", field="name"
        )
    if name in RESERVED_NAMES:
        raise DomainError(f"{name!r} is reserved; choose another name.", field="name")
    if Workspace.objects.filter(name=name).exists():
        raise DomainError(f"A workspace named {name} already exists.", field="name")
    return Workspace.objects.create(name=name, description=description)


@transaction.atomic
def workspace_quota_bind(*, workspace: Workspace, quota: Quota) -> WorkspaceQuota:
    """Let the workspace submit to a quota."""
    binding, _ = WorkspaceQuota.objects.get_or_create(workspace=workspace, quota=quota)
    return binding


@transaction.atomic
def workspace_quota_unbind(*, workspace: Workspace, quota: Quota) -> None:
    """Stop the workspace from using a quota, with its usage rules."""
    ResourceUsageRule.objects.filter(workspace=workspace, quota=quota).delete()
    WorkspaceQuota.objects.filter(workspace=workspace, quota=quota).delete()


def _sync_permissions(workspace: Workspace, user: Any, role: str | None) -> None:
    """Give the user exactly the object permissions of their role."""
    granted = set(ROLE_PERMISSIONS.get(role, ())) if role else set()
    for perm in ALL_PERMISSIONS:
        if perm in granted:
            assign_perm(perm, user, workspace)
        else:
            remove_perm(perm, user, workspace)


@transaction.atomic
def workspace_member_add(*, workspace: Workspace, user: User, role: str) -> Membership:
    """Add a member with a role, or change the role of an existing member."""
    if role not in Role.values:
        raise DomainError(f"Role {role!r} is not one of {', '.join(Role.values)}.", field="role")
    membership, _ = Membership.objects.update_or_create(
        workspace=workspace, user=user, defaults={"role": role}
    )
    _sync_permissions(workspace, user, role)
    return membership


@transaction.atomic
def workspace_member_remove(*, workspace: Workspace, user: User) -> None:
    """Remove a member and every permission the role gave them."""
    Membership.objects.filter(workspace=workspace, user=user).delete()
    _sync_permissions(workspace, user, None)


@transaction.atomic
def resource_usage_rule_set(
    *,
    workspace: Workspace,
    quota: Quota,
    role: str,
    max_gpus: int | None = None,
    max_priority: int | None = None,
) -> ResourceUsageRule:
    """Allow a role to use a bound quota, with optional caps (milli-GPU, priority 1-9)."""
    if not WorkspaceQuota.objects.filter(workspace=workspace, quota=quota).exists():
        raise DomainError(
            f"Quota {quota.name} is not bound to workspace {workspace.name}.", field="quota"
        )
    if role not in Role.values:
        raise DomainError(f"Role {role!r} is not one of {', '.join(Role.values)}.", field="role")
    if max_priority is not None and not 1 <= max_priority <= 9:
        raise DomainError(
            f"Max priority must be between 1 and 9, not {max_priority}.", field="max_priority"
        )
    if max_gpus is not None and max_gpus < 0:
        raise DomainError(
            f"Max GPUs must be 0 or more, not {max_gpus} milli-GPU.", field="max_gpus"
        )
    rule, _ = ResourceUsageRule.objects.update_or_create(
        workspace=workspace,
        quota=quota,
        role=role,
        defaults={"max_gpus": max_gpus, "max_priority": max_priority},
    )
    return rule


@dataclass(frozen=True)
class UsageRuleInput:
    """One row of the Resource Usage tab: max_gpus in milli-GPU, None for no cap."""

    quota: Quota
    role: str
    max_gpus: int | None = None
    max_priority: int | None = None


@transaction.atomic
def resource_usage_rules_save(
    *, workspace: Workspace, rules: Sequence[UsageRuleInput]
) -> list[ResourceUsageRule]:
    """Replace the workspace's resource-usage rules with `rules`, all or nothing."""
    bound = set(
        WorkspaceQuota.objects.filter(workspace=workspace).values_list("quota_id", flat=True)
    )
    seen: dict[tuple[int, str], int] = {}
    for number, rule in enumerate(rules, start=1):
        prefix = f"Rule {number}"
        if rule.quota.pk not in bound:
            raise DomainError(
                f"{prefix}: quota {rule.quota.name} is not bound to workspace {workspace.name}.",
                field="quota",
            )
        if rule.role not in Role.values:
            raise DomainError(
                f"{prefix}: role {rule.role!r} is not one of {', '.join(Role.values)}.",
                field="role",
            )
        if rule.max_gpus is not None and rule.max_gpus < 0:
            raise DomainError(
                f"{prefix}: max GPUs must be 0 or more, not {rule.max_gpus / 1000:g}.",
                field="max_gpus",
            )
        if rule.max_priority is not None and not 1 <= rule.max_priority <= 9:
            raise DomainError(
                f"{prefix}: max priority must be between 1 and 9, not {rule.max_priority}.",
                field="max_priority",
            )
        key = (rule.quota.pk, rule.role)
        if key in seen:
            raise DomainError(
                f"{prefix}: role {rule.role} already has a rule for {rule.quota.name} "
                f"(rule {seen[key]}); one rule per quota and role.",
                field="role",
            )
        seen[key] = number
    ResourceUsageRule.objects.filter(workspace=workspace).delete()
    return ResourceUsageRule.objects.bulk_create(
        ResourceUsageRule(
            workspace=workspace,
            quota=rule.quota,
            role=rule.role,
            max_gpus=rule.max_gpus,
            max_priority=rule.max_priority,
        )
        for rule in rules
    )
