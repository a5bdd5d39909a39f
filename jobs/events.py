"""Record timeline events and push them, after commit, to the live groups that may see them.

A cycle records hundreds of events; inside `batch()` they leave in one push after commit
instead of one push each.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction

from jobs.live import Message, broadcast_many
from jobs.models import Workload, WorkloadEvent

_local = threading.local()


def record(workload: Workload, kind: str, message: str, *, at: datetime, **data: Any) -> None:
    """Add an entry to the workload's timeline and push it once the transaction commits."""
    WorkloadEvent.objects.create(workload=workload, at=at, kind=kind, message=message, data=data)
    push(_message(workload, kind, message, data))


class Timeline:
    """Entries for several timelines, stored in one INSERT by `save`, pushed as `record` does."""

    def __init__(self) -> None:
        self.rows: list[WorkloadEvent] = []

    def add(
        self, workload: Workload, kind: str, message: str, *, at: datetime, **data: Any
    ) -> None:
        """`record` an entry; its row waits for `save` (in the same transaction)."""
        row = WorkloadEvent(workload=workload, at=at, kind=kind, message=message, data=data)
        self.rows.append(row)
        push(_message(workload, kind, message, data))

    def save(self) -> None:
        """Store the entries added so far, in the order they came."""
        WorkloadEvent.objects.bulk_create(self.rows)
        self.rows = []


def _message(workload: Workload, kind: str, message: str, data: dict[str, Any]) -> Message:
    """What the live groups of the workload's workspace and quota are sent about an entry."""
    payload = {
        "workload": workload.pk,
        "name": workload.name,
        "kind": kind,
        "message": message,
        "status": workload.status,
        "in_quota": workload.in_quota,
        **data,
    }
    return Message(workload.workspace_id, workload.quota_id, payload)


def push(message: Message) -> None:
    """Send a message after commit, with the open batch if there is one."""
    pending: list[Message] | None = getattr(_local, "batch", None)
    if pending is not None:
        pending.append(message)
    else:
        transaction.on_commit(lambda: broadcast_many([message]), robust=True)


@contextmanager
def batch() -> Iterator[None]:
    """Collect the pushes of a block and send them together once the transaction commits."""
    outer: list[Message] | None = getattr(_local, "batch", None)
    if outer is not None:
        yield  # an enclosing batch sends them
        return
    messages: list[Message] = []
    _local.batch = messages
    try:
        yield
    finally:
        _local.batch = None
    if messages:
        transaction.on_commit(lambda: broadcast_many(messages), robust=True)
