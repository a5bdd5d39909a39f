"""Rows the dashboard reads, written straight to the database (no scheduler involved)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model

from cluster.models import Node
from jobs.choices import Kind, PodStatus, Status
from jobs.models import Pod, UsageSample, Workload
from quotas.models import Quota

T0 = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


def samples(
    quota: Quota,
    *,
    start: datetime = T0,
    minutes: int = 60,
    in_quota: int = 0,
    borrowed: int = 0,
    pending: int = 0,
    preemptions: int = 0,
) -> list[UsageSample]:
    """One sample a minute for `minutes`, all with the same values (milli-GPU)."""
    rows = [
        UsageSample(
            at=start + timedelta(minutes=i),
            quota=quota,
            gpu_in_quota=in_quota,
            gpu_borrowed=borrowed,
            gpu_pending=pending,
            preemptions=preemptions,
        )
        for i in range(minutes)
    ]
    return UsageSample.objects.bulk_create(rows)


def running_workload(demo: Any, *, name: str, gpu: int, quota: str = "Quota 1.1") -> Workload:
    """A running training workload of team B (or another quota's) holding `gpu` per replica."""
    owner = get_user_model().objects.get(username="bob")
    return Workload.objects.create(
        workspace=demo.workspaces["workspace_b"],
        quota=demo.quotas[quota],
        owner=owner,
        name=name,
        kind=Kind.TRAINING,
        status=Status.RUNNING,
        gpu=gpu,
        submitted_at=T0,
        started_at=T0,
    )


def pod_on(
    workload: Workload,
    node: Node,
    devices: list[int],
    *,
    borrowed: bool = False,
    index: int = 0,
    status: str = PodStatus.RUNNING,
) -> Pod:
    """A pod of `workload` on `node` holding `devices`."""
    return Pod.objects.create(
        workload=workload,
        index=index,
        node=node,
        devices=devices,
        borrowed=borrowed,
        status=status,
        created_at=T0,
    )
