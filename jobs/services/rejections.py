"""A node refused a replica before it ran: place it again elsewhere, charge nothing, cool the node.

Kubelet admission rejections (`OutOfnvidia.com/gpu` when pods Tidepool does not own hold the
GPUs, an untolerated `NoExecute` taint, a device plugin error) and nodes that became
ineligible just before a pod was created say nothing about the application. The replica's
pod ends Failed with the node's words, the node takes no new pods for
TIDEPOOL_NODE_COOLDOWN_SECONDS (the bridge snapshot treats it as unschedulable), and the next
cycle places the replica on another node: a service's missing replica on its own, a gang job
whole again from the queue. Neither counts as a restart. A workload refused MAX_REFUSALS
times fails, quoting the last refusal, so a cluster that keeps refusing never loops.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from cluster.services import node_cooldown_set
from jobs.backends.base import NODE_REFUSAL, Backend, PodReport
from jobs.choices import LIVE_POD_STATUSES, EventKind, Kind, PodStatus, Status
from jobs.events import record
from jobs.models import Pod, Workload
from jobs.services.pods import pods_end
from jobs.services.workloads import end_workload
from jobs.visibility import BORROWED, scrub
from jobs.wakeup import request_cycle

MAX_REFUSALS = 5  # per workload: more means the cluster will not run it, whatever the node


def replica_place_again(pod: Pod, report: PodReport, *, now: datetime, backend: Backend) -> None:
    """Handle a node's refusal of `pod` (already ended Failed with the node's words)."""
    w = pod.workload
    until = now + timedelta(seconds=settings.TIDEPOOL_NODE_COOLDOWN_SECONDS)
    node = pod.node if pod.node_id is not None else None
    if node is not None:
        node_cooldown_set(node=node, until=until)
    reason, data = report.reason, dict[str, object](rejected=True)
    if node is not None and pod.borrowed:
        # members read this entry: a borrowed node's name stays in the data for admins
        reason, data = scrub(reason, [node.name]), {**data, "node": node.name, BORROWED: True}
    refusals = Pod.objects.filter(workload=w, reason__startswith=NODE_REFUSAL).count()
    if refusals >= MAX_REFUSALS:
        end_workload(
            w,
            status=Status.FAILED,
            reason=(
                f"Replica {pod.index}: {reason}. Nodes refused this workload's replicas "
                f"{refusals} times, so it is not placed again."
            ),
            now=now,
            event_kind=EventKind.FINISHED,
        )
        request_cycle()
        return
    cooling = "" if node is None or pod.borrowed else f" {node.name} takes no new pods until "
    cooling += f"{until:%H:%M:%S} UTC." if cooling else ""
    record(
        w,
        EventKind.FAULT,
        f"Replica {pod.index}: {reason}. It is placed again on another node; no restart is "
        f"charged.{cooling}",
        at=now,
        **data,
    )
    if w.kind != Kind.INFERENCE:
        # A gang starts whole: its other replicas stop and the next cycle places it again.
        _requeue_uncharged(w, now=now, why=f"Replica {pod.index} refused by its node", b=backend)
    request_cycle()


def _requeue_uncharged(w: Workload, *, now: datetime, why: str, b: Backend) -> None:
    """Put a gang back in the queue from its last checkpoint without counting a restart."""
    live = w.pods.filter(status__in=LIVE_POD_STATUSES)
    pods_end(live, status=PodStatus.STOPPED, reason=f"Placing again: {why}", now=now, backend=b)
    w.progress, w.last_progress_at, w.in_quota = w.checkpoint_progress, None, None
    w.status, w.status_reason = Status.REQUEUED, f"{why}; placed again on another node."
    w.save(update_fields=["progress", "last_progress_at", "in_quota", "status", "status_reason"])
