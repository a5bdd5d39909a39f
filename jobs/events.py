"""Record timeline events and push them, after commit, to the live groups that may see them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from jobs.models import Workload, WorkloadEvent


def record(workload: Workload, kind: str, message: str, *, at: datetime, **data: Any) -> None:
    """Add an entry to the workload's timeline and push it once the transaction commits."""
    WorkloadEvent.objects.create(workload=workload, at=at, kind=kind, message=message, data=data)
    payload = {
        "workload": workload.pk,
        "name": workload.name,
        "kind": kind,
        "message": message,
        "status": workload.status,
        "in_quota": workload.in_quota,
        **data,
    }
    transaction.on_commit(lambda: push(workload.workspace_id, workload.quota_id, payload))


def push(workspace_id: int, quota_id: int, payload: dict[str, Any]) -> None:
    """Send one event to the groups of its workspace, its quota and the cluster."""
    from jobs.live import broadcast

    broadcast(workspace_id=workspace_id, quota_id=quota_id, payload=payload)
