"""A simulated cluster: pods start after a delay, training advances with the clock.

The pod rows are the simulated cluster's state, so any process (the runner, a management
command, a test) can inject a fault: a crashed pod, a lost node, a hung job. `observe`
reports what changed, as a real cluster's watch would. Its workloads also report as real
ones do through the report endpoint: training sends heartbeats (unless hung) and names its
checkpoints ("step-<n>"), and interactive instances show activity in bursts while in use.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import connection
from django.db.models import FloatField
from django.db.models.expressions import RawSQL

from jobs.backends.base import PodReport
from jobs.choices import LIVE_POD_STATUSES, Kind, PodStatus, Status

if TYPE_CHECKING:
    from jobs.models import Pod, Workload

NODE_LOST = "node_lost"
PROGRESS_FIELDS = ("progress", "last_progress_at")
CRASH = "crash:"
# A running replica's heartbeat is stored when the last one is this old (a client's pace).
HEARTBEAT_EVERY = timedelta(seconds=30)
# An instance in use shows activity this often; an abandoned one (odd pk) none after a while.
ACTIVITY_EVERY = timedelta(minutes=5)
ABANDONED_AFTER = timedelta(minutes=20)
BATCH = 400  # rows per UPDATE (a bound on its parameters)


@dataclass
class SimulatedBackend:
    """Pods start `start_delay` seconds after they are created."""

    start_delay: float = 30.0

    def create_pod(self, pod: Pod, *, now: datetime) -> None:
        """Schedule the pod's start."""
        pod.start_after = now + timedelta(seconds=self.start_delay)

    def delete_pod(self, pod: Pod, *, grace_seconds: int) -> None:
        """Nothing runs for real: the pod row already says it stopped."""

    def refresh(self, *, now: datetime) -> None:
        """Nothing to catch up with: the pod rows are the cluster."""

    def instance_url(self, pod: Pod) -> str | None:
        """A placeholder page of the console itself: no simulated pod serves anything."""
        from django.urls import reverse

        workload = pod.workload
        return reverse("jobs:instance_open", args=[workload.workspace.name, workload.pk])

    def observe(self, *, now: datetime) -> list[PodReport]:
        """Injected faults, started pods and finished training since the last call."""
        from jobs.models import Pod, Workload

        reports = []
        faulty = Pod.objects.filter(status__in=LIVE_POD_STATUSES).exclude(sim_fault="")
        for pod_id, fault, message in faulty.values_list("pk", "sim_fault", "message"):
            if fault == NODE_LOST:
                reports.append(
                    PodReport(pod_id, PodStatus.FAILED, reason="Node lost", node_lost=True)
                )
            else:
                code = int(fault.removeprefix(CRASH))
                why = f"Crashed with exit code {code}" + (f": {message}" if message else "")
                reports.append(
                    PodReport(pod_id, PodStatus.FAILED, code, why[:300], message=message)
                )
        faulty.update(sim_fault="")
        broken = {r.pod_id for r in reports}
        starting = Pod.objects.filter(status=PodStatus.PENDING, start_after__lte=now)
        reports += [
            PodReport(pk, PodStatus.RUNNING)
            for pk in starting.values_list("pk", flat=True)
            if pk not in broken
        ]
        running = Workload.objects.filter(
            kind=Kind.TRAINING, status=Status.RUNNING
        ).prefetch_related("pods")
        progressed: dict[int, float] = {}
        beating: list[int] = []
        for workload in running:
            pods = [p for p in workload.pods.all() if p.status == PodStatus.RUNNING]
            if len(pods) < workload.replicas or broken.intersection(p.pk for p in pods):
                continue
            if not workload.sim_hung:
                beating += [p.pk for p in pods if _beat_due(p, now)]
                fields = _advance(workload, now)
                if len(fields) == len(PROGRESS_FIELDS):
                    progressed[workload.pk] = workload.progress
                else:  # a checkpoint too: rarer, saved on its own
                    workload.save(update_fields=fields)
            if workload.progress >= workload.total_work:
                reports += [PodReport(p.pk, PodStatus.SUCCEEDED, exit_code=0) for p in pods]
        _save_progress(progressed, now)
        _heartbeat(beating, now)
        _report_activity(now)
        return reports

    def inject_pod_crash(self, pod: Pod, *, exit_code: int = 137, message: str = "") -> None:
        """The pod's process dies with an exit code and, optionally, a termination message."""
        type(pod).objects.filter(pk=pod.pk).update(sim_fault=f"{CRASH}{exit_code}", message=message)

    def inject_node_down(self, node_name: str) -> int:
        """A node goes away: it is cordoned and its pods are lost."""
        from cluster.models import Node
        from cluster.services import node_schedulable_set
        from jobs.models import Pod

        for node in Node.objects.filter(name=node_name):
            node_schedulable_set(node=node, schedulable=False)
        lost = Pod.objects.filter(node__name=node_name, status__in=LIVE_POD_STATUSES)
        return lost.update(sim_fault=NODE_LOST)

    def inject_hang(self, workload: Workload) -> None:
        """The job stops making progress while its pods keep running."""
        type(workload).objects.filter(pk=workload.pk).update(sim_hung=True)

    def logs(self, pod: Pod, *, tail: int, since: datetime | None, now: datetime) -> list[str]:
        """Lines made from the pod's rows and the clock (jobs.backends.sim_logs)."""
        from jobs.backends.sim_logs import pod_log

        return pod_log(pod, tail=tail, since=since, now=now)


def _beat_due(pod: Pod, now: datetime) -> bool:
    """The running replica's client would have sent a heartbeat since the stored one."""
    return pod.last_heartbeat_at is None or pod.last_heartbeat_at <= now - HEARTBEAT_EVERY


def _heartbeat(pod_ids: list[int], now: datetime) -> None:
    """Store the replicas' heartbeats where the report endpoint stores them (Pod rows)."""
    from jobs.models import Pod

    for at in range(0, len(pod_ids), BATCH):
        chunk = pod_ids[at : at + BATCH]
        Pod.objects.filter(pk__in=chunk, status=PodStatus.RUNNING).update(last_heartbeat_at=now)


def last_activity(instance: Workload, now: datetime) -> datetime | None:
    """The simulated user's last burst of activity on a running instance (None: none yet).

    Bursts come every ACTIVITY_EVERY from the start; an instance of odd pk is abandoned
    ABANDONED_AFTER its start, so both an instance in use and an idle one play out.
    """
    start = instance.started_at
    if start is None:
        return None
    end = now if instance.pk % 2 == 0 else min(now, start + ABANDONED_AFTER)
    bursts = int((end - start) / ACTIVITY_EVERY)
    return start + bursts * ACTIVITY_EVERY if bursts > 0 else None


def _report_activity(now: datetime) -> None:
    """Store the running instances' latest activity where the report endpoint stores it."""
    from jobs.models import Workload

    running = Workload.objects.filter(
        kind=Kind.INTERACTIVE, status=Status.RUNNING, started_at__isnull=False
    ).only("pk", "started_at", "last_activity_at")
    for instance in running:
        at = last_activity(instance, now)
        if at is not None and (instance.last_activity_at is None or at > instance.last_activity_at):
            Workload.objects.filter(pk=instance.pk, status=Status.RUNNING).update(
                last_activity_at=at
            )


def _save_progress(progress: dict[int, float], now: datetime) -> None:
    """Store each job's new progress, and `now` as its last progress, in one UPDATE per BATCH.

    One save per running job took the write lock for ~0.3 ms of CPU each, on every sync.
    """
    from jobs.models import Workload

    pk = connection.ops.quote_name(Workload._meta.pk.attname)
    items = list(progress.items())
    for at in range(0, len(items), BATCH):
        chunk = items[at : at + BATCH]
        case = f"CASE {pk} {' '.join(['WHEN %s THEN %s'] * len(chunk))} END"
        new = RawSQL(case, [v for item in chunk for v in item], output_field=FloatField())
        # still running: a job preempted meanwhile was rolled back to its checkpoint, and
        # its resume must show that checkpoint, not the progress read before
        Workload.objects.filter(pk__in=[k for k, _ in chunk], status=Status.RUNNING).update(
            progress=new, last_progress_at=now
        )


def _advance(workload: Workload, now: datetime) -> list[str]:
    """Add GPU-seconds of work since the last progress; checkpoint on each interval boundary.

    Returns the fields it changed, for the caller to store.
    """
    since = workload.last_progress_at or now
    rate = workload.total_gpu / 1000
    before = workload.progress
    workload.progress = min(
        before + max((now - since).total_seconds(), 0.0) * rate, workload.total_work
    )
    workload.last_progress_at = now
    fields = list(PROGRESS_FIELDS)
    last = workload.last_checkpoint_at or since
    intervals = int((now - last).total_seconds() // workload.checkpoint_interval)
    if workload.progress >= workload.total_work:
        workload.checkpoint_progress, workload.last_checkpoint_at = workload.progress, now
    elif intervals > 0:
        # The checkpoint is taken at the boundary, not at this observation.
        at = last + timedelta(seconds=intervals * workload.checkpoint_interval)
        workload.checkpoint_progress = before + max((at - since).total_seconds(), 0.0) * rate
        workload.last_checkpoint_at = at
    else:
        return fields
    # named as a training script names its checkpoints: by step (a second of training each)
    workload.checkpoint_label = f"step-{int(workload.checkpoint_progress / rate)}"
    return [*fields, "checkpoint_progress", "last_checkpoint_at", "checkpoint_label"]
