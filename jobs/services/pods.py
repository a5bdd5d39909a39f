"""End replicas: the one way a pod leaves Pending or Running."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from jobs.backends.base import Backend
from jobs.choices import LIVE_POD_STATUSES
from jobs.models import Pod

GRACE_SECONDS = 30  # time a stopped replica gets to checkpoint


def pods_end(
    pods: Iterable[Pod], *, status: str, reason: str, now: datetime, backend: Backend
) -> list[Pod]:
    """End the pods that are still live and have the backend stop them; returns those.

    The UPDATE matches live rows only, so a pod's status moves forward and never back from
    an end, whatever the caller read.
    """
    live = [p for p in pods if p.status in LIVE_POD_STATUSES]
    Pod.objects.filter(pk__in=[p.pk for p in live], status__in=LIVE_POD_STATUSES).update(
        status=status, ended_at=now, reason=reason
    )
    for pod in live:
        pod.status, pod.ended_at, pod.reason = status, now, reason
        backend.delete_pod(pod, grace_seconds=GRACE_SECONDS)
    return live
