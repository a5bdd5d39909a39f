"""What removing a member or unbinding a quota would do, in numbers, for the confirmation page.

Neither service stops a workload (workspaces.services): a removed member's jobs keep running
and an unbound quota's jobs keep running, and its queued ones may still start, because only
submit checks the binding. The pages say exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, Sum
from django.urls import reverse

from console.confirm import Confirmation, plural
from console.units import called, milli_to_gpus
from jobs.choices import ACTIVE_STATUSES, PodStatus, Status
from jobs.models import Pod, Workload
from quotas.models import Quota
from workspaces.models import Membership, ResourceUsageRule, Workspace


@dataclass(frozen=True)
class Active:
    """Workloads that have not ended: how many, how many run, and the GPUs their pods hold."""

    total: int
    running: int
    queued: int
    gpu: int  # milli-GPU of running pods

    @property
    def facts(self) -> str:
        """The numbers a confirmation depends on."""
        return f"{self.total}:{self.running}:{self.gpu}"


def _active(workspace: Workspace, where: Q) -> Active:
    """Active workloads of the workspace that match `where` (3 queries)."""
    active = Workload.objects.filter(where, workspace=workspace, status__in=ACTIVE_STATUSES)
    total = active.count()
    running = active.filter(status=Status.RUNNING).count()
    held = Pod.objects.filter(workload__in=active, status=PodStatus.RUNNING).aggregate(
        gpu=Sum("workload__gpu")
    )
    return Active(total, running, total - running, int(held["gpu"] or 0))


def _running(active: Active) -> str:
    """ "2 running on 16 GPUs" or "none running"."""
    if not active.running:
        return "none running"
    return f"{active.running} running on {milli_to_gpus(active.gpu)} GPUs"


def member_remove(
    workspace: Workspace, membership: Membership, *, actor: Any, chrome: dict[str, Any]
) -> Confirmation:
    """Remove a member: the access they lose and the workloads of theirs that stay."""
    user = membership.user
    active = _active(workspace, Q(owner=user))
    effects = [
        f"{user.username} loses the {membership.get_role_display()} role in {workspace.name}: "
        "they can no longer see, submit, cancel or stop anything in it."
    ]
    if active.total:
        one = active.total == 1
        effects.append(
            f"{plural(active.total, 'active workload')} of theirs ({_running(active)}) "
            f"{'stays' if one else 'stay'}: nothing is cancelled, and only the workspace's "
            f"other members can cancel {'it' if one else 'them'}."
        )
    else:
        effects.append(f"{user.username} has no queued or running workload here.")
    if user.pk == actor.pk:
        effects.append("You are removing yourself: this page is the last you see of it.")
    return Confirmation(
        title=f"Remove {user.username} from {workspace.name}",
        effects=effects,
        action=f"Remove {user.username}",
        back=reverse("workspaces:detail", args=[workspace.name]),
        facts=f"{membership.role}:{active.facts}",
        context=chrome,
    )


def quota_unbind(workspace: Workspace, quota: Quota, *, chrome: dict[str, Any]) -> Confirmation:
    """Unbind a quota: submits it refuses, rules it deletes, workloads that stay."""
    active = _active(workspace, Q(quota=quota))
    rules = ResourceUsageRule.objects.filter(workspace=workspace, quota=quota).count()
    effects = [
        f"{workspace.name} can no longer submit to {called(quota.name)}.",
        f"{plural(rules, 'resource usage rule')} of {workspace.name} for {quota.name} "
        f"{'is' if rules == 1 else 'are'} deleted.",
    ]
    if active.total:
        effects.append(
            f"{plural(active.total, 'active workload')} of {workspace.name} in {quota.name} "
            f"{'stays' if active.total == 1 else 'stay'}: {_running(active)}, nothing is stopped"
            + (
                f", and {plural(active.queued, 'queued workload')} may still start."
                if active.queued
                else "."
            )
        )
    else:
        effects.append(f"No workload of {workspace.name} is queued or running in {quota.name}.")
    return Confirmation(
        title=f"Unbind {quota.name} from {workspace.name}",
        effects=effects,
        action=f"Unbind {quota.name}",
        back=reverse("workspaces:detail", args=[workspace.name]),
        facts=f"{rules}:{active.facts}",
        context=chrome,
    )
