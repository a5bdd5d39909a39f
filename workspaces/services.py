"""Create workspaces, bind quotas, manage members and resource-usage rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from guardian.shortcuts import assign_perm, remove_perm

from cluster.locking import write_lock
from console import clock
from console.errors import DomainError, NameTaken
from console.names import check_slug_name
from console.numbers import INT32
from console.units import duration_text
from jobs.choices import ACTIVE_STATUSES, EventKind, Kind
from jobs.events import Timeline, batch
from jobs.models import Workload
from quotas.models import Quota
from workspaces.choices import Role
from workspaces.models import Membership, ResourceUsageRule, Workspace, WorkspaceQuota
from workspaces.roles import ALL_PERMISSIONS, ROLE_PERMISSIONS

# Names that would shadow a page under /workspaces/.
RESERVED_NAMES = frozenset({"new"})
# The shortest time limit an interactive instance may have, as instance_start requires.
MIN_INSTANCE_DURATION = 60


@transaction.atomic
def workspace_create(*, name: str, description: str = "") -> Workspace:
    """Create an empty workspace for one team."""
    if not name.strip():
        raise DomainError("A workspace needs a name.", field="name")
    check_slug_name(name, what="workspace name")
    if name in RESERVED_NAMES:
        raise DomainError(f"{name!r} is reserved; choose another name.", field="name")
    if Workspace.objects.filter(name=name).exists():
        raise NameTaken(f"A workspace named {name} already exists.", field="name")
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


class Keep(Enum):
    """A time limit the caller leaves as it is (an API PATCH that names only the other)."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True)
class InstanceLimitsSaved:
    """The workspace with its new limits, and the active instances whose limit was lowered."""

    workspace: Workspace
    shortened: list[Workload]


def _check_limit(seconds: int | None, field: str, what: str) -> None:
    """Empty, or between a minute and what the 32-bit column holds."""
    if seconds is None:
        return
    if seconds < MIN_INSTANCE_DURATION:
        raise DomainError(
            f"The {what} must be at least {MIN_INSTANCE_DURATION} s, not {seconds} s.",
            field=field,
        )
    if seconds > INT32:
        raise DomainError(f"The {what} may be at most {INT32:,} s, not {seconds:,} s.", field=field)


@transaction.atomic
def workspace_instance_limits_set(
    *,
    actor: Any,
    workspace: Workspace,
    default_duration: int | None | Keep = KEEP,
    max_duration: int | None | Keep = KEEP,
    now: datetime | None = None,
) -> InstanceLimitsSaved:
    """Set the default and maximum duration (seconds) of the workspace's interactive instances.

    A maximum lower than an active instance's limit lowers that limit, with an event on its
    timeline; the time-limits task then stops an instance already past it.
    """
    now = now or clock.now()
    write_lock()  # it rewrites workloads: after every other writer, before reading them
    current = Workspace.objects.get(pk=workspace.pk)
    default = current.instance_default_duration if default_duration is KEEP else default_duration
    maximum = current.instance_max_duration if max_duration is KEEP else max_duration
    _check_limit(default, "instance_default_duration", "default duration")
    _check_limit(maximum, "instance_max_duration", "maximum duration")
    if default is not None and maximum is not None and default > maximum:
        # Name the field the caller changed: lowering only the maximum under the default
        # is a mistake in the maximum.
        only_max = default_duration is KEEP and max_duration is not KEEP
        raise DomainError(
            f"The default duration ({duration_text(default)}) may not be longer than the "
            f"maximum ({duration_text(maximum)}).",
            field="instance_max_duration" if only_max else "instance_default_duration",
        )
    # Updating the row first waits for an instance_start that holds it (the cap it read is
    # the old one), so the instance it creates is among those read below.
    Workspace.objects.filter(pk=workspace.pk).update(
        instance_default_duration=default, instance_max_duration=maximum
    )
    workspace.instance_default_duration = default
    workspace.instance_max_duration = maximum
    shortened: list[Workload] = []
    if maximum is not None:
        shortened = list(
            Workload.objects.filter(
                workspace_id=workspace.pk, kind=Kind.INTERACTIVE, status__in=ACTIVE_STATUSES
            )
            .filter(Q(max_duration__isnull=True) | Q(max_duration__gt=maximum))
            .order_by("pk")
        )
    if shortened:
        Workload.objects.filter(pk__in=[w.pk for w in shortened]).update(max_duration=maximum)
        assert maximum is not None
        timeline = Timeline()
        with batch():
            for instance in shortened:
                was = instance.max_duration
                instance.max_duration = maximum
                timeline.add(
                    instance,
                    EventKind.LIMIT,
                    _lowered(instance, was, maximum, actor=actor, workspace=workspace, now=now),
                    at=now,
                    max_duration=maximum,
                    was=was,
                )
            timeline.save()
    return InstanceLimitsSaved(workspace=workspace, shortened=shortened)


def _lowered(
    instance: Workload,
    was: int | None,
    maximum: int,
    *,
    actor: Any,
    workspace: Workspace,
    now: datetime,
) -> str:
    """The timeline's sentence for an instance whose limit the new maximum lowered."""
    before = "no limit" if was is None else duration_text(was)
    text = (
        f"Time limit lowered from {before} to {duration_text(maximum)}: {actor.username} "
        f"capped interactive instances in {workspace.name} at {duration_text(maximum)}."
    )
    started = instance.started_at
    if started is not None and started + timedelta(seconds=maximum) <= now:
        text += " It has run longer than that, so it stops at the next time-limit check."
    return text
