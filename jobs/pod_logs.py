"""A replica's recent log lines, as one user may read them: the read behind the API and pages.

The lines come from the backend in force (the simulator makes them, Kubernetes reads them);
for a member, every line is scrubbed of the nodes the workload's borrowed pods are or were on
(jobs.visibility), whatever the container printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from console.errors import DomainError
from jobs.backends import get_backend
from jobs.backends.log_lines import LogsUnavailable, line_time
from jobs.choices import LIVE_POD_STATUSES, Kind
from jobs.models import Pod, Workload
from jobs.visibility import hidden_nodes, scrub

MAX_TAIL = 5000
DEFAULT_TAIL = 200


@dataclass(frozen=True)
class ReplicaLogs:
    """One attempt of one replica: which it is, whether it still runs, and its last lines."""

    replica: int | None  # None: the workload has no pod yet
    attempt: int | None
    pod: str
    status: str
    live: bool  # its pod may still print: follow it
    replicas: list[int]
    attempts: list[int]  # of this replica, oldest first
    lines: list[str]
    notice: str  # why there are no lines ("" when the backend gave some)
    since: datetime | None  # the last line's time: ask for lines after it to follow


def replica_logs(
    workload: Workload,
    *,
    replica: int | None = None,
    attempt: int | None = None,
    tail: int = DEFAULT_TAIL,
    since: datetime | None = None,
    hide_borrowed_nodes: bool,
    now: datetime,
) -> ReplicaLogs:
    """The lines of `replica` (default: the first current one) at `attempt` (default: latest).

    DomainError on the field when the workload has no such replica or attempt.
    """
    pods = list(Pod.objects.filter(workload=workload).select_related("node"))
    replicas = sorted({p.index for p in pods})
    if replica is None and not pods:
        why = f"{workload.name} {'never ran' if workload.ended_at else 'has not been placed yet'}."
        return ReplicaLogs(None, None, "", "", False, [], [], [], why, since)
    if replica is None:
        replica = _default_replica(workload, pods)
    if replica not in replicas:
        known = ", ".join(map(str, replicas)) or "none yet"
        raise DomainError(
            f"{workload.name} has no replica {replica} (replicas: {known}).", field="replica"
        )
    mine = sorted((p for p in pods if p.index == replica), key=lambda p: p.attempt)
    attempts = [p.attempt for p in mine]
    if attempt is None:
        attempt = attempts[-1]
    if attempt not in attempts:
        raise DomainError(
            f"Replica {replica} has no attempt {attempt} (attempts: "
            f"{', '.join(map(str, attempts))}).",
            field="attempt",
        )
    pod = next(p for p in mine if p.attempt == attempt)
    pod.workload = workload
    try:
        lines, notice = get_backend().logs(pod, tail=tail, since=since, now=now), ""
    except LogsUnavailable as e:
        lines, notice = [], str(e)
    if hide_borrowed_nodes:
        hidden = hidden_nodes((p.borrowed, p.node.name if p.node else None) for p in pods)
        lines, notice = [scrub(line, hidden) for line in lines], scrub(notice, hidden)
    stamps = [at for at in map(line_time, lines) if at is not None]
    return ReplicaLogs(
        replica=replica,
        attempt=attempt,
        pod=pod.name,
        status=pod.status,
        live=pod.status in LIVE_POD_STATUSES,
        replicas=replicas,
        attempts=attempts,
        lines=lines,
        notice=notice,
        since=stamps[-1] if stamps else since,
    )


def _default_replica(workload: Workload, pods: list[Pod]) -> int:
    """The first replica of the current pods: a service's live ones, else the latest attempt."""
    if workload.kind == Kind.INFERENCE:
        live = [p.index for p in pods if p.status in LIVE_POD_STATUSES]
        if live:
            return min(live)
    latest = max(p.attempt for p in pods)
    return min(p.index for p in pods if p.attempt == latest)
