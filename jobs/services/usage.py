"""Usage sampling: per quota, GPUs In Quota, borrowed, pending, and preemptions since last time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Q, Sum

from cluster.selectors import schedulable_capacity
from jobs.choices import LIVE_POD_STATUSES, WAITING_STATUSES, EventKind
from jobs.models import ControlState, Pod, UsageSample, Workload, WorkloadEvent
from quotas.models import Quota


def usage_sample(*, now: datetime) -> list[UsageSample]:
    """Write one sample per quota for workloads submitted directly to it (4 queries).

    The sums are read before the write transaction: under SQLite's single writer, submits
    need not wait behind them (a sample is a reading at about `now`, not a decision).
    """
    state, _ = ControlState.objects.get_or_create(pk=1)
    since = state.last_sample_at
    placed = (
        Pod.objects.filter(status__in=LIVE_POD_STATUSES)
        .values("workload__quota_id")
        .annotate(
            in_quota=Sum("workload__gpu", filter=Q(borrowed=False)),
            borrowed=Sum("workload__gpu", filter=Q(borrowed=True)),
        )
    )
    pending = (
        Workload.objects.filter(status__in=WAITING_STATUSES)
        .values("quota_id")
        .annotate(gpu=Sum(F("gpu") * F("replicas")))
    )
    window = Q(at__lte=now) if since is None else Q(at__gt=since, at__lte=now)
    preempted = (
        WorkloadEvent.objects.filter(window, kind=EventKind.PREEMPTED)
        .values("workload__quota_id")
        .annotate(n=Count("pk"))
    )
    by_quota: dict[int, dict[str, int]] = {}
    for row in placed:
        entry = by_quota.setdefault(row["workload__quota_id"], {})
        entry["in_quota"], entry["borrowed"] = row["in_quota"] or 0, row["borrowed"] or 0
    for waiting in pending:
        by_quota.setdefault(waiting["quota_id"], {})["pending"] = waiting["gpu"] or 0
    for event in preempted:
        by_quota.setdefault(event["workload__quota_id"], {})["preemptions"] = event["n"]
    samples = [
        UsageSample(
            at=now,
            quota_id=quota_id,
            gpu_in_quota=by_quota.get(quota_id, {}).get("in_quota", 0),
            gpu_borrowed=by_quota.get(quota_id, {}).get("borrowed", 0),
            gpu_pending=by_quota.get(quota_id, {}).get("pending", 0),
            preemptions=by_quota.get(quota_id, {}).get("preemptions", 0),
        )
        for quota_id in Quota.objects.values_list("pk", flat=True)
    ]
    with transaction.atomic():
        UsageSample.objects.bulk_create(samples)
        state.last_sample_at = now
        state.save(update_fields=["last_sample_at"])
        payload = _sample_payload(now, samples)
        # robust: the samples are committed; a channel layer hiccup must not fail the task.
        transaction.on_commit(lambda: _sample_push(payload), robust=True)
    return samples


def _sample_payload(now: datetime, samples: list[UsageSample]) -> dict[str, Any]:
    """The websocket form of one round of samples; amounts stay in milli-GPU."""
    return {
        "kind": "sample",
        "at": now.isoformat(),
        "quotas": {
            str(s.quota_id): {
                "in_quota": s.gpu_in_quota,
                "borrowed": s.gpu_borrowed,
                "pending": s.gpu_pending,
                "preemptions": s.preemptions,
            }
            for s in samples
        },
        "allocated": sum(s.gpu_in_quota + s.gpu_borrowed for s in samples),
    }


def _sample_push(payload: dict[str, Any]) -> None:
    """Send the samples to the cluster group, with the schedulable capacity (1 query)."""
    from jobs.live import broadcast

    broadcast(
        workspace_id=None,
        quota_id=None,
        payload={**payload, "capacity": schedulable_capacity()},
    )
