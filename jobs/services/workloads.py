"""Submit and cancel workloads, after checking the workspace's Resource Usage rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from cluster.locking import write_lock
from cluster.models import NodePool
from console import clock
from console.errors import DomainError, NameTaken
from console.fast.statements import Statement
from console.names import check_dns_name
from console.numbers import INT32
from console.units import called, duration_text, milli_to_gpus
from jobs.choices import (
    ACTIVE_STATUSES,
    ENDED_STATUSES,
    LIVE_POD_STATUSES,
    EventKind,
    FailurePolicy,
    IdlePolicy,
    Kind,
    PodStatus,
    RestartMode,
    Status,
)
from jobs.events import record
from jobs.models import Workload
from jobs.services.fit import workload_fit_check
from jobs.services.scaling import scaling_rules_retire
from jobs.services.signals import failure_policy_check
from jobs.wakeup import request_cycle
from quotas.models import Quota
from quotas.selectors import quota_pools_in_effect
from workspaces.access import Access
from workspaces.models import Workspace, WorkspaceQuota
from workspaces.roles import SUBMIT
from workspaces.selectors import workspace_role


@dataclass(frozen=True)
class Shape:
    """What every workload asks for: replicas × (milli-GPU, millicores, MiB) on some pools."""

    replicas: int
    gpu: int
    cpu: int = 0
    memory: int = 0
    priority: int = 5


def _check_shape(shape: Shape, kind: str) -> None:
    """Replicas at least 1 (a service may be at 0), whole GPUs above one GPU, priority 1-9."""
    least = 0 if kind == Kind.INFERENCE else 1
    if shape.replicas < least:
        raise DomainError(
            f"Replicas must be at least {least}, not {shape.replicas}.", field="replicas"
        )
    if shape.gpu > 1000 and shape.gpu % 1000:
        raise DomainError(
            f"{milli_to_gpus(shape.gpu)} GPUs per replica: a fraction is only allowed below one "
            "GPU (GPU sharing); above one, ask for whole GPUs.",
            field="gpu",
        )
    if shape.cpu < 0 or shape.memory < 0:
        field = "cpu" if shape.cpu < 0 else "memory"
        raise DomainError(f"{field} must be 0 or more.", field=field)
    if not 1 <= shape.priority <= 9:
        raise DomainError(
            f"Priority must be between 1 and 9, not {shape.priority}.", field="priority"
        )


def _check_total(shape: Shape, peak_replicas: int | None) -> None:
    """Refuse more milli-GPUs in one workload (at its most replicas) than 32 bits hold."""
    # SQL multiplies the two columns (a job list sorted by GPUs, the quotas' pending usage);
    # on PostgreSQL an integer product past 2**31 - 1 fails that query for every reader.
    peak = peak_replicas or shape.replicas
    if shape.gpu * peak > INT32:
        raise DomainError(
            f"{peak} × {milli_to_gpus(shape.gpu)} GPUs is more than {INT32 // 1000:,} GPUs "
            "in one workload.",
            field="replicas" if peak == shape.replicas else "max_replicas",
        )


def _submitter(actor: Any, workspace: Workspace, access: Access | None) -> Access:
    """The actor's access (`access` when the caller built it), once it lets them submit in
    the workspace: checked before anything else, so who may not submit learns nothing more
    from a refusal (PermissionDenied: 403)."""
    access = access or Access(actor)
    assert access.user == actor
    access.require(SUBMIT, workspace)
    return access


def _named_quota(access: Access, workspace: Workspace, quota: Quota | None) -> Quota:
    """The quota asked for; None (the caller could not choose one) is refused with the
    quotas the actor may use here."""
    if quota is not None:
        return quota
    names = ", ".join(u.quota.name for u in access.usable_quotas(workspace)) or "none"
    raise DomainError(f"Name the quota (quotas you may use here: {names}).", field="quota")


def _check_usage_rules(
    *, access: Access, workspace: Workspace, quota: Quota, total_gpu: int, priority: int
) -> None:
    """A Resource Usage rule lets the actor's role use the quota within its caps (the
    strictest cap wins)."""
    usable = {u.quota.pk: u for u in access.usable_quotas(workspace)}
    rule = usable.get(quota.pk)
    if rule is None:
        if not WorkspaceQuota.objects.filter(workspace=workspace, quota=quota).exists():
            raise DomainError(
                f"{called(quota.name)} is not bound to workspace {workspace.name}.",
                field="quota",
            )
        role = workspace_role(access.user, workspace) or "-"
        raise DomainError(
            f"No Resource Usage rule of {workspace.name} lets the role {role} use {quota.name}.",
            field="quota",
        )
    if rule.max_gpus is not None and total_gpu > rule.max_gpus:
        raise DomainError(
            f"The Resource Usage rule for {quota.name} caps your role at "
            f"{milli_to_gpus(rule.max_gpus)} GPUs; this asks for {milli_to_gpus(total_gpu)}.",
            field="gpu",
        )
    if rule.max_priority is not None and priority > rule.max_priority:
        raise DomainError(
            f"The Resource Usage rule for {quota.name} caps your role at priority "
            f"{rule.max_priority}; this asks for {priority}.",
            field="priority",
        )


def _check_pools(quota: Quota, node_pools: Sequence[NodePool]) -> None:
    """At least one accepted pool, all in the quota's resource pool and allowed by the quota
    and its ancestors."""
    if not node_pools:
        raise DomainError("Choose at least one node pool.", field="node_pools")
    for np in node_pools:
        if np.resource_pool_id != quota.resource_pool_id:
            raise DomainError(
                f"Node pool {np.name} is not in resource pool {quota.resource_pool.name} "
                f"of {quota.name}.",
                field="node_pools",
            )
    allowed = quota_pools_in_effect(quota)
    if allowed is None:
        return
    shut = sorted({np.name for np in node_pools if np.pk not in allowed})
    if shut:
        only = ", ".join(sorted(allowed.values())) or "no node pool"
        raise DomainError(
            f"{called(quota.name)} may not use node pool {' or '.join(shut)}; its workloads "
            f"may run only in {only}.",
            field="node_pools",
        )


def _named(shape: tuple[()], workspace_id: int, name: str) -> Any:
    """The id of the workspace's workload called `name`."""
    return Workload.objects.filter(workspace_id=workspace_id, name=name).order_by().values("id")


# read in every submit's write transaction: compiled once, it holds the lock less
_NAMED = Statement(_named)


def _limits_of(shape: tuple[()], workspace_id: int) -> Any:
    """The workspace's interactive time limits, its row held until the submit commits."""
    # FOR NO KEY UPDATE: an admin lowering the cap waits for this submit (and then shortens
    # the instance it made), or this submit waits and reads the new cap. It does not wait
    # for other submits in the workspace, whose new rows only share-lock the workspace.
    return (
        Workspace.objects.select_for_update(no_key=True)
        .filter(pk=workspace_id)
        .order_by()
        .values("instance_default_duration", "instance_max_duration")
    )


_LIMITS_OF = Statement(_limits_of)


def _instance_duration(workspace: Workspace, asked: int | None) -> int:
    """The time limit an instance gets: what it asks for, else the workspace's default,
    never less than a minute nor more than the workspace's maximum."""
    (limits,) = _LIMITS_OF.rows(workspace.pk)
    default, cap = limits["instance_default_duration"], limits["instance_max_duration"]
    if asked is None:
        if default is None:
            raise DomainError(
                f"Give a maximum duration: {workspace.name} sets no default for interactive "
                "instances.",
                field="max_duration",
            )
        return int(default)
    if asked < 60:
        raise DomainError(
            f"Maximum duration must be at least 60 s, not {asked}.", field="max_duration"
        )
    if cap is not None and asked > cap:
        raise DomainError(
            f"{workspace.name} caps interactive instances at {duration_text(cap)}; this asks "
            f"for {duration_text(asked)}.",
            field="max_duration",
        )
    return asked


def _check_name(workspace: Workspace, name: str) -> str:
    """Names are required, DNS labels (console.names) and unique within the workspace."""
    if not name.strip():
        raise DomainError("A workload needs a name.", field="name")
    check_dns_name(name, what="workload name")
    if _NAMED.rows(workspace.pk, name, high=1):
        raise NameTaken(f"{workspace.name} already has a workload named {name}.", field="name")
    return name


def _create(
    *,
    actor: Any,
    workspace: Workspace,
    quota: Quota | None,
    name: str,
    kind: str,
    shape: Shape,
    node_pools: Sequence[NodePool],
    now: datetime | None,
    access: Access,
    peak_replicas: int | None = None,
    **fields: Any,
) -> Workload:
    """Validate and create any kind of workload, then ask for a cycle.

    `access` has let the actor submit here; the Resource Usage caps apply to `peak_replicas`
    (a service's max), else to its replicas.
    """
    now = now or clock.now()
    quota = _named_quota(access, workspace, quota)
    name = _check_name(workspace, name)
    _check_shape(shape, kind)
    _check_total(shape, peak_replicas)
    _check_pools(quota, node_pools)
    _check_usage_rules(
        access=access,
        workspace=workspace,
        quota=quota,
        total_gpu=shape.gpu * (peak_replicas or shape.replicas),
        priority=shape.priority,
    )
    workload_fit_check(
        quota=quota,
        kind=kind,
        replicas=shape.replicas,
        gpu=shape.gpu,
        cpu=shape.cpu,
        memory=shape.memory,
        node_pools=node_pools,
    )
    workload = Workload.objects.create(
        workspace=workspace,
        quota=quota,
        owner=actor,
        name=name,
        kind=kind,
        replicas=shape.replicas,
        gpu=shape.gpu,
        cpu=shape.cpu,
        memory=shape.memory,
        priority=shape.priority,
        submitted_at=now,
        **fields,
    )
    workload.node_pools.add(*node_pools)  # a new row: nothing to replace
    record(
        workload,
        EventKind.SUBMITTED,
        f"Submitted by {actor.username} to {quota.name}: {shape.replicas} × "
        f"{milli_to_gpus(shape.gpu)} GPU.",
        at=now,
    )
    request_cycle()
    return workload


@transaction.atomic
def job_submit(
    *,
    actor: Any,
    workspace: Workspace,
    quota: Quota | None,
    name: str,
    shape: Shape,
    node_pools: Sequence[NodePool],
    idle_policy: str = IdlePolicy.NONE,
    checkpoint_interval: int = 1800,
    total_work: float | None = None,
    fault_tolerance: bool = True,
    max_restarts: int = 3,
    restart_on_failure: bool = True,
    restart_on_preemption: bool = True,
    restart_on_node_loss: bool = True,
    restart_mode: str = RestartMode.SYNC,
    hang_minutes: int | None = None,
    failure_policy: str = FailurePolicy.ANY,
    retry_exit_codes: Sequence[int] = (),
    retry_messages: Sequence[str] = (),
    fail_exit_codes: Sequence[int] = (),
    fail_messages: Sequence[str] = (),
    image: str = "",
    command: str = "",
    now: datetime | None = None,
    access: Access | None = None,
) -> Workload:
    """Submit a training job; total_work is GPU-seconds (default: one hour on all its GPUs).

    With failure_policy ExitCodeAndErrorMsg, a failure is retried only when its exit code
    or message is in a retry list (message patterns are regular expressions, searched), and
    fails the job at once when in a fail list (jobs.services.signals.failure_verdict).
    """
    access = _submitter(actor, workspace, access)
    if idle_policy not in IdlePolicy.values:
        raise DomainError(
            f"Idle policy {idle_policy!r} is not one of {', '.join(IdlePolicy.values)}.",
            field="idle_policy",
        )
    if restart_mode not in RestartMode.values:
        raise DomainError(f"Restart mode {restart_mode!r} is unknown.", field="restart_mode")
    if checkpoint_interval < 60:
        raise DomainError(
            f"Checkpoint interval must be at least 60 s, not {checkpoint_interval}.",
            field="checkpoint_interval",
        )
    if hang_minutes is not None and hang_minutes < 1:
        raise DomainError("Hang detection needs at least 1 minute.", field="hang_minutes")
    policy = failure_policy_check(
        failure_policy=failure_policy,
        retry_exit_codes=list(retry_exit_codes),
        retry_messages=list(retry_messages),
        fail_exit_codes=list(fail_exit_codes),
        fail_messages=list(fail_messages),
    )
    # The shape first: the default total work comes from it, and a refusal names the field
    # the client sent (replicas, gpu), never total_work, which they may not have sent.
    _check_shape(shape, Kind.TRAINING)
    if shape.gpu <= 0:
        raise DomainError(
            "A training job needs GPUs: gpu must be above 0 (0.5 shares a GPU), not 0.",
            field="gpu",
        )
    if total_work is None:
        total_work = shape.replicas * shape.gpu / 1000 * 3600
    if total_work <= 0:
        raise DomainError("Total work must be above 0 GPU-seconds.", field="total_work")
    return _create(
        actor=actor,
        workspace=workspace,
        quota=quota,
        name=name,
        kind=Kind.TRAINING,
        shape=shape,
        node_pools=node_pools,
        now=now,
        access=access,
        idle_policy=idle_policy,
        checkpoint_interval=checkpoint_interval,
        total_work=total_work,
        fault_tolerance=fault_tolerance,
        max_restarts=max_restarts,
        restart_on_failure=restart_on_failure,
        restart_on_preemption=restart_on_preemption,
        restart_on_node_loss=restart_on_node_loss,
        restart_mode=restart_mode,
        hang_minutes=hang_minutes,
        image=image,
        command=command,
        **policy,
    )


@transaction.atomic
def service_create(
    *,
    actor: Any,
    workspace: Workspace,
    quota: Quota | None,
    name: str,
    shape: Shape,
    node_pools: Sequence[NodePool],
    min_replicas: int = 1,
    max_replicas: int | None = None,
    image: str = "",
    command: str = "",
    now: datetime | None = None,
    access: Access | None = None,
) -> Workload:
    """Create an inference service; shape.replicas is the initial target."""
    access = _submitter(actor, workspace, access)
    max_replicas = max_replicas if max_replicas is not None else max(shape.replicas, 1)
    if max_replicas < 1:
        raise DomainError(
            f"Max replicas must be at least 1, not {max_replicas}.", field="max_replicas"
        )
    # 0 is a service scaled to zero: it holds no GPUs until a rule or a person scales it up.
    if not 0 <= min_replicas <= max_replicas:
        raise DomainError(
            f"Min replicas {min_replicas} must be at least 0 and at most max {max_replicas}.",
            field="min_replicas",
        )
    if not min_replicas <= shape.replicas <= max_replicas:
        raise DomainError(
            f"Replicas {shape.replicas} must be within {min_replicas}..{max_replicas}.",
            field="replicas",
        )
    return _create(
        actor=actor,
        workspace=workspace,
        quota=quota,
        name=name,
        kind=Kind.INFERENCE,
        shape=shape,
        node_pools=node_pools,
        now=now,
        access=access,
        peak_replicas=max_replicas,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        image=image,
        command=command,
        fault_tolerance=True,
    )


@transaction.atomic
def instance_start(
    *,
    actor: Any,
    workspace: Workspace,
    quota: Quota | None,
    name: str,
    shape: Shape,
    node_pools: Sequence[NodePool],
    max_duration: int | None = None,
    idle_stop_minutes: int | None = None,
    image: str = "",
    now: datetime | None = None,
    access: Access | None = None,
) -> Workload:
    """Start an interactive instance with a time limit (seconds; None: the workspace's
    default), within the workspace's maximum."""
    access = _submitter(actor, workspace, access)
    max_duration = _instance_duration(workspace, max_duration)
    if idle_stop_minutes is not None and idle_stop_minutes < 1:
        raise DomainError("Idle auto-stop needs at least 1 minute.", field="idle_stop_minutes")
    return _create(
        actor=actor,
        workspace=workspace,
        quota=quota,
        name=name,
        kind=Kind.INTERACTIVE,
        shape=shape,
        node_pools=node_pools,
        now=now,
        access=access,
        max_duration=max_duration,
        idle_stop_minutes=idle_stop_minutes,
        image=image,
    )


def end_workload(
    workload: Workload, *, status: str, reason: str, now: datetime, event_kind: str
) -> None:
    """End a workload: stop its live pods, set the final status, record it.

    The caller holds the write lock and read `workload` after taking it.
    """
    from jobs.backends import get_backend
    from jobs.services.pods import pods_end

    pods_end(
        workload.pods.filter(status__in=LIVE_POD_STATUSES),
        status=PodStatus.SUCCEEDED if status == Status.SUCCEEDED else PodStatus.STOPPED,
        reason=reason,
        now=now,
        backend=get_backend(),
    )
    workload.status = status
    workload.status_reason = reason
    workload.ended_at = now
    workload.pending_reason = ""
    # An ended workload holds no quota: it is neither In Quota nor Not (as a queued one).
    workload.in_quota = None
    fields = ["status", "status_reason", "ended_at", "pending_reason", "in_quota"]
    if status == Status.SUCCEEDED and workload.kind == Kind.TRAINING and workload.total_work:
        # done is all of it, whether or not the backend reported progress (Kubernetes does not)
        workload.progress = workload.checkpoint_progress = workload.total_work
        fields += ["progress", "checkpoint_progress"]
    workload.save(update_fields=fields)
    if workload.kind == Kind.INFERENCE:
        scaling_rules_retire(service=workload)
    record(workload, event_kind, reason, at=now)


@transaction.atomic
def workload_cancel(*, actor: Any, workload: Workload, now: datetime | None = None) -> Workload:
    """Cancel a queued or running workload (stop, for an interactive instance)."""
    now = now or clock.now()
    write_lock()
    workload = Workload.objects.select_related("workspace", "quota").get(pk=workload.pk)
    if workload.status in ENDED_STATUSES:
        raise DomainError(f"{workload.name} has already ended ({workload.status}).", field="status")
    assert workload.status in ACTIVE_STATUSES
    stopped = workload.kind == Kind.INTERACTIVE
    end_workload(
        workload,
        status=Status.STOPPED if stopped else Status.CANCELLED,
        reason=f"{'Stopped' if stopped else 'Cancelled'} by {actor.username}.",
        now=now,
        event_kind=EventKind.CANCELLED,
    )
    request_cycle()
    return workload
