"""What a workload action that ends work would do, in numbers, for its confirmation page.

Each function reads the workload as the view loaded it (pods prefetched) and answers a
console.confirm.Confirmation; it changes nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.urls import reverse

from console.confirm import Confirmation, plural
from console.units import milli_to_gpus
from jobs.choices import PodStatus, Status
from jobs.models import ScalingRule, Workload
from jobs.views import age, current_pods


def _replicas(workload: Workload) -> tuple[int, int]:
    """(running, pending) replicas of the latest attempt."""
    pods = current_pods(workload)
    running = sum(1 for p in pods if p.status == PodStatus.RUNNING)
    pending = sum(1 for p in pods if p.status == PodStatus.PENDING)
    return running, pending


def _verb(count: int, verb: str) -> str:
    """ "stops" after one, "stop" after several."""
    return verb + "s" if count == 1 else verb


def _held(workload: Workload, running: int, pending: int) -> str:
    """ "2 running replicas (16 GPUs) stop" and the pending ones that never start."""
    parts = []
    if running:
        parts.append(
            f"{plural(running, 'running replica')} ({milli_to_gpus(running * workload.gpu)} "
            f"GPUs) {_verb(running, 'stop')}"
        )
    if pending:
        parts.append(f"{plural(pending, 'pending replica')} never {_verb(pending, 'start')}")
    return "; ".join(parts) + "." if parts else ""


def _percent(workload: Workload, amount: float) -> int:
    return min(int(100 * amount / workload.total_work), 100) if workload.total_work else 0


def job_cancel(workload: Workload, *, workspace: str, now: datetime, chrome: Any) -> Confirmation:
    """Cancel a training job: the replicas that stop and the work a checkpoint does not keep."""
    running, pending = _replicas(workload)
    effects = []
    if workload.status == Status.QUEUED:
        effects.append(f"{workload.name} leaves the queue; it has not started.")
    held = _held(workload, running, pending)
    if held:
        effects.append(held[0].upper() + held[1:])
    if workload.status != Status.QUEUED and workload.total_work:
        done = _percent(workload, workload.progress)
        if workload.last_checkpoint_at and workload.checkpoint_progress:
            saved = _percent(workload, workload.checkpoint_progress)
            ago = age((now - workload.last_checkpoint_at).total_seconds())
            effects.append(
                f"It is {done}% done; the last checkpoint ({saved}%) was saved {ago} ago. "
                "A cancelled job is not resumed."
            )
        else:
            effects.append(f"It is {done}% done with no checkpoint yet; that work is lost.")
    if workload.status == Status.REQUEUED:
        effects.append("It is waiting to resume; once cancelled it never will.")
    return Confirmation(
        title=f"Cancel training job {workload.name}",
        effects=effects,
        action="Cancel job",
        keep="Keep it running" if running else "Keep it",
        back=reverse("jobs:job_detail", args=[workspace, workload.pk]),
        facts=f"{workload.status}:{running}:{pending}",
        context=chrome,
    )


def instance_stop(
    workload: Workload, *, workspace: str, now: datetime, chrome: Any
) -> Confirmation:
    """Stop an interactive instance: its GPUs, and whatever was not saved on it."""
    running, pending = _replicas(workload)
    effects = []
    held = _held(workload, running, pending)
    if running:
        effects.append(
            f"{workload.name} stops: {milli_to_gpus(running * workload.gpu)} GPUs are freed and "
            "whatever is not saved outside the instance is lost."
        )
    elif held:
        effects.append(held[0].upper() + held[1:])
    else:
        effects.append(f"{workload.name} leaves the queue; it has not started.")
    if workload.started_at and workload.ended_at is None:
        ran = age((now - workload.started_at).total_seconds())
        limit = f" of its {age(workload.max_duration)} limit" if workload.max_duration else ""
        effects.append(f"It has run {ran}{limit}. A stopped instance cannot be started again.")
    return Confirmation(
        title=f"Stop interactive instance {workload.name}",
        effects=effects,
        action="Stop instance",
        back=reverse("jobs:instance_list", args=[workspace]),
        facts=f"{workload.status}:{running}:{pending}",
        context=chrome,
    )


def service_scale_down(
    service: Workload, replicas: int, *, workspace: str, chrome: Any
) -> Confirmation:
    """Lower a service's target: the running replicas that stop and the GPUs they free."""
    running, pending = _replicas(service)
    stopping = max(running - replicas, 0)
    dropped = max(pending - max(replicas - running, 0), 0)
    effects = []
    if stopping:
        effects.append(
            f"{service.name}: {service.replicas} → {replicas} replicas frees "
            f"{milli_to_gpus(stopping * service.gpu)} GPUs; "
            f"{plural(stopping, 'running replica')} of {running} {_verb(stopping, 'stop')}."
        )
    else:
        effects.append(
            f"{service.name}: target {service.replicas} → {replicas} replicas; "
            f"no running replica stops ({running} running)."
        )
    if dropped:
        effects.append(f"{plural(dropped, 'pending replica')} will not start.")
    effects.append(
        f"Requests are served by {plural(min(running, replicas), 'replica')} from then on."
    )
    return Confirmation(
        title=f"Scale {service.name} down to {replicas}",
        effects=effects,
        action="Scale down",
        back=reverse("jobs:service_detail", args=[workspace, service.pk]),
        facts=f"{service.replicas}:{running}:{pending}",
        context=chrome,
    )


def rule_delete(
    service: Workload, rule: ScalingRule, when: datetime | None, *, workspace: str, chrome: Any
) -> Confirmation:
    """Delete a scaling rule: the scaling that will no longer happen."""
    if when is None:
        next_text = "It is disabled, so it would not fire."
    else:
        stamp = when.strftime("%Y-%m-%d %H:%M")
        next_text = (
            f"It would next set {service.name} to {plural(rule.target_replicas, 'replica')} "
            f"at {stamp} {rule.timezone}; that will not happen."
        )
    return Confirmation(
        title=f"Delete scaling rule {rule.name}",
        effects=[
            f"Rule {rule.name} ({rule.cron}, {rule.timezone}) is deleted. {next_text}",
            f"{service.name} stays at {plural(service.replicas, 'replica')} until scaled.",
        ],
        action="Delete rule",
        back=reverse("jobs:service_detail", args=[workspace, service.pk]),
        facts=f"{rule.pk}:{rule.cron}:{rule.target_replicas}:{rule.enabled}",
        context=chrome,
    )
