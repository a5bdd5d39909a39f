"""Backend sync: pod phases become replica and workload status; fault tolerance restarts jobs.

The signals running workloads send (heartbeats, checkpoints, exit codes and messages) are
read by jobs.services.signals the same way for every backend; this module acts on them.

The cluster is read before the write lock (network round trips hold no one up); the reports
are applied under it, each to the pod and workload rows as they are then, so a report about a
pod the control loop has since ended (a preempted, cancelled or scaled-down replica) is stale
news and changes nothing.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from django.db import transaction

from cluster.locking import write_lock
from console import metrics
from jobs.backends import get_backend
from jobs.backends.base import Backend, PodReport
from jobs.bridge.snapshot import lost_gpu_seconds
from jobs.choices import LIVE_POD_STATUSES, EventKind, Kind, PodStatus, RestartMode, Status
from jobs.events import Timeline, batch, record
from jobs.models import Pod, Workload
from jobs.progress import lost_text
from jobs.services.pods import pods_end
from jobs.services.rejections import replica_place_again
from jobs.services.signals import Verdict, failure_verdict, hangs_find
from jobs.services.workloads import end_workload
from jobs.visibility import BORROWED, scrub
from jobs.wakeup import request_cycle

START_BATCH = 500  # started pods stored per statement (a bound on its parameters)


def _restart_allowed(w: Workload, *, node_lost: bool) -> bool:
    """Fault tolerance is on for this cause and restarts remain."""
    if w.kind == Kind.INFERENCE:
        return True  # a service always replaces its replicas
    if not w.fault_tolerance or w.failures >= w.max_restarts:
        return False
    return w.restart_on_node_loss if node_lost else w.restart_on_failure


def _no_restart(w: Workload) -> str:
    """Why fault tolerance restarts the job no more."""
    if not w.fault_tolerance:
        return "fault tolerance is off"
    return f"{w.failures} of {w.max_restarts} restarts used"


def _count_restart(w: Workload, cause: str) -> None:
    """Count a restart of the workload by cause, once the sync commits."""
    quota = w.quota.name
    metrics.after_commit(lambda: metrics.RESTARTS.labels(quota=quota, cause=cause).inc())


def _requeue(
    w: Workload, *, now: datetime, why: str, backend: Backend, cause: str, charge: bool = True
) -> None:
    """Stop every live pod and put the job back in the queue from its last checkpoint."""
    live = w.pods.filter(status__in=LIVE_POD_STATUSES)
    # every replica's work since the checkpoint is lost, the failed one's included
    lost = lost_gpu_seconds(w, replicas=w.replicas, now=now)
    pods_end(live, status=PodStatus.STOPPED, reason=f"Restarting: {why}", now=now, backend=backend)
    w.progress, w.last_progress_at, w.in_quota = w.checkpoint_progress, None, None
    w.status, w.status_reason, w.sim_hung = Status.REQUEUED, why, False
    w.restarts += 1
    w.failures += 1 if charge else 0
    w.save(
        update_fields=[
            "progress",
            "last_progress_at",
            "in_quota",
            "status",
            "status_reason",
            "sim_hung",
            "restarts",
            "failures",
        ]
    )
    count = f"Restart {w.failures} of {w.max_restarts}" if charge else "No restart charged"
    record(
        w,
        EventKind.RESTARTED,
        f"{why}. {count}: requeued. {lost_text(w, lost)}",
        at=now,
        work_lost_gpu_seconds=lost,
        checkpoint=w.checkpoint_label,
    )
    _count_restart(w, cause)
    request_cycle()


def _replace_pod(
    pod: Pod, w: Workload, *, now: datetime, why: str, backend: Backend, cause: str
) -> None:
    """Async restart: start a new attempt of only the failed replica, on the same node."""
    lost = lost_gpu_seconds(w, replicas=1, now=now) if w.kind == Kind.TRAINING else 0.0
    w.restarts += 1
    w.failures += 1 if w.kind != Kind.INFERENCE else 0
    w.save(update_fields=["restarts", "failures"])
    replacement = Pod(
        workload=w,
        index=pod.index,
        attempt=pod.attempt + 1,
        node_id=pod.node_id,
        devices=pod.devices,
        borrowed=pod.borrowed,
        resume_from=w.checkpoint_label,
        created_at=now,
    )
    backend.create_pod(replacement, now=now)
    replacement.save()
    text = f"{why}. Replica {pod.index} restarted."
    if w.kind == Kind.TRAINING:
        text += f" {lost_text(w, lost)}"
    record(
        w,
        EventKind.RESTARTED,
        text,
        at=now,
        work_lost_gpu_seconds=lost,
        checkpoint=w.checkpoint_label,
    )
    _count_restart(w, cause)


def _on_failure(pod: Pod, report: PodReport, *, now: datetime, backend: Backend) -> None:
    """A replica failed: restart by the job's fault tolerance, or fail the job."""
    w = pod.workload
    reason, data = report.reason, {}
    # A query for the rare failure of a borrowed pod rather than a join for every report.
    node = pod.node.name if pod.borrowed and pod.node_id is not None and pod.node else None
    if node is not None:
        # The backend's words may name the node ("Node lost: a100-03 is not ready"): members
        # read this entry, the status reason and the restart's, so they name no borrowed node;
        # the node stays in the entry's data for platform admins (jobs.visibility).
        reason = scrub(reason, [node])
        data = {"node": node, BORROWED: True}
    if report.disrupted:
        _on_disruption(pod, report, reason, data, now=now, backend=backend)
        return
    why = f"Replica {pod.index} failed: {reason or 'exit code ' + str(report.exit_code)}"
    verdict = _verdict(w, report)
    record(
        w,
        EventKind.FAULT,
        f"{why} ({verdict.rule})." if verdict else why,
        at=now,
        exit_code=report.exit_code,
        node_lost=report.node_lost,
        **({"rule": verdict.rule, "retry": verdict.retry} if verdict else {}),
        **data,
    )
    failing = verdict is not None and not verdict.retry
    if report.refused or failing or not _restart_allowed(w, node_lost=report.node_lost):
        if report.refused:
            detail = "the cluster will not run it as asked, so no restart is tried"
        elif verdict is not None and failing:
            detail = f"{verdict.rule}, so the job fails (ExitCodeAndErrorMsg)"
        else:
            detail = _no_restart(w)
        end_workload(
            w,
            status=Status.FAILED,
            reason=f"{why}; {detail}.",
            now=now,
            event_kind=EventKind.FINISHED,
        )
        request_cycle()
        return
    same_node_ok = not report.node_lost
    cause = "node_lost" if report.node_lost else "failure"
    if w.kind == Kind.INFERENCE or (w.restart_mode == RestartMode.ASYNC and same_node_ok):
        if same_node_ok:
            _replace_pod(pod, w, now=now, why=why, backend=backend, cause=cause)
        else:
            request_cycle()  # the service's missing replica is placed by the next cycle
        return
    _requeue(w, now=now, why=why, backend=backend, cause=cause)


def _verdict(w: Workload, report: PodReport) -> Verdict | None:
    """The ExitCodeAndErrorMsg policy's verdict on a container's failure (not a lost node's)."""
    if report.node_lost or report.refused or w.kind != Kind.TRAINING:
        return None
    return failure_verdict(w, exit_code=report.exit_code, message=report.message)


def _on_disruption(
    pod: Pod,
    report: PodReport,
    reason: str,
    data: dict[str, Any],
    *,
    now: datetime,
    backend: Backend,
) -> None:
    """A replica was ended from outside (drain, preemption, shutdown): restart, uncharged.

    As after a node loss, a service places the replica again and a job with fault tolerance
    requeues from its checkpoint; neither counts it against max_restarts.
    """
    w = pod.workload
    why = f"Replica {pod.index} disrupted: {reason}"
    record(w, EventKind.FAULT, why, at=now, disrupted=True, **data)
    if w.kind == Kind.INFERENCE:
        request_cycle()  # the missing replica is placed by the next cycle
        return
    if not (w.fault_tolerance and w.restart_on_node_loss):
        end_workload(
            w,
            status=Status.FAILED,
            reason=f"{why}; fault tolerance does not restart it.",
            now=now,
            event_kind=EventKind.FINISHED,
        )
        request_cycle()
        return
    _requeue(w, now=now, why=why, backend=backend, cause="disruption", charge=False)


def _start(pods: list[Pod], *, now: datetime) -> None:
    """Pods now running, stored together: a few statements for all, not a few per pod."""
    if not pods:
        return
    Pod.objects.filter(pk__in=[p.pk for p in pods], status=PodStatus.PENDING).update(
        status=PodStatus.RUNNING, started_at=now
    )
    running = {p.workload_id: p.workload for p in pods}
    pending = Pod.objects.filter(workload_id__in=running, status=PodStatus.PENDING)
    waiting = set(pending.values_list("workload_id", flat=True))
    # Work starts once every replica runs; the clock of progress starts here.
    ready = [w for pk, w in running.items() if pk not in waiting]
    Workload.objects.filter(pk__in=[w.pk for w in ready]).update(
        last_progress_at=now, last_checkpoint_at=now
    )
    timeline = Timeline()
    waits: list[tuple[str, float]] = []
    for w in ready:
        w.last_progress_at = w.last_checkpoint_at = now
        timeline.add(w, EventKind.STARTED, "All replicas running.", at=now)
        waits.append((w.quota.name, (now - w.submitted_at).total_seconds()))
    timeline.save()

    def observe() -> None:
        for quota, seconds in waits:
            metrics.SUBMIT_TO_RUNNING.labels(quota=quota).observe(max(seconds, 0.0))

    metrics.after_commit(observe)


def _apply(report: PodReport, pod: Pod, *, now: datetime, backend: Backend) -> None:
    """Apply one pod report of a replica that ended (if it had not ended already)."""
    w = pod.workload
    live = Pod.objects.filter(pk=pod.pk, status__in=LIVE_POD_STATUSES)
    if not live.update(
        status=report.phase,
        ended_at=now,
        exit_code=report.exit_code,
        reason=report.reason,
        message=report.message,
    ):
        return  # ended earlier in this sync, by a restart of its workload
    pod.status, pod.ended_at = report.phase, now
    pod.exit_code, pod.reason, pod.message = report.exit_code, report.reason, report.message
    if report.phase == PodStatus.FAILED and report.rejected:
        replica_place_again(pod, report, now=now, backend=backend)
    elif report.phase == PodStatus.FAILED:
        _on_failure(pod, report, now=now, backend=backend)
    elif not w.pods.filter(status__in=LIVE_POD_STATUSES).exists():
        w.progress = w.total_work
        end_workload(
            w,
            status=Status.SUCCEEDED,
            reason="All replicas finished.",
            now=now,
            event_kind=EventKind.FINISHED,
        )
        request_cycle()


def _detect_hangs(now: datetime, backend: Backend) -> None:
    """Restart, or fail (reason Hung), running training with a replica silent too long."""
    for hang in hangs_find(now=now):
        w, minutes = hang.workload, hang.workload.hang_minutes
        silent = f"no heartbeat or progress from replica {hang.replica} for {minutes} minutes"
        why = f"{silent[0].upper()}{silent[1:]} (hang detected)"
        record(w, EventKind.FAULT, why, at=now, replica=hang.replica, hung=True)
        if _restart_allowed(w, node_lost=False):
            _requeue(w, now=now, why=why, backend=backend, cause="hang")
            continue
        end_workload(
            w,
            status=Status.FAILED,
            reason=f"Hung: {silent}; {_no_restart(w)}.",
            now=now,
            event_kind=EventKind.FINISHED,
        )
        request_cycle()


def backend_sync(*, now: datetime, backend: Backend | None = None) -> int:
    """Read what the cluster did since the last sync and apply it; returns reports applied."""
    started = time.perf_counter()
    backend = backend or get_backend()
    backend.refresh(now=now)
    with transaction.atomic():
        write_lock()
        with batch():
            applied = _sync(now, backend)
    metrics.SYNC_DURATION.observe(time.perf_counter() - started)
    metrics.stamp(metrics.LAST_SYNC_KEY)
    return applied


def _sync(now: datetime, backend: Backend) -> int:
    """Apply the backend's reports, then look for hung jobs."""
    reports = backend.observe(now=now)
    pods = Pod.objects.select_related("workload__workspace", "workload__quota").in_bulk(
        [r.pod_id for r in reports]
    )
    # Pods of one workload share one row object, so a restart applied for one pod's report
    # is seen by the next report of the same workload.
    workloads: dict[int, Workload] = {}
    for fetched in pods.values():
        fetched.workload = workloads.setdefault(fetched.workload_id, fetched.workload)
    applied = 0
    started: list[Pod] = []
    for report in reports:
        pod = pods.get(report.pod_id)
        if pod is None or pod.status not in LIVE_POD_STATUSES:
            continue  # already ended by the control loop: stale news
        if pod.workload.status != Status.RUNNING:
            continue
        applied += 1
        if report.phase != PodStatus.RUNNING or len(started) == START_BATCH:
            # Reports apply in order: the pods started so far are stored before an end is.
            _start(started, now=now)
            started = []
        if report.phase == PodStatus.RUNNING:
            pod.status, pod.started_at = PodStatus.RUNNING, now
            started.append(pod)
        else:
            _apply(report, pod, now=now, backend=backend)
    _start(started, now=now)
    _detect_hangs(now, backend)
    return applied
