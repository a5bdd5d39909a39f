"""Record timeline events and push them, after commit, to the live groups that may see them.

A cycle records hundreds of events; inside `batch()` they leave in one push after commit
instead of one push each.

Each pushed event carries `seq`, the id of its WorkloadEvent row: one sequence for every web
process and worker, kept in the database, so a socket that missed pushes (a dropped
connection, Redis down) asks for the stored events after the last `seq` it saw
(`events_after`) and gets them even if they were never pushed.
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
from jobs.selectors import borrowed_nodes
from jobs.visibility import NODE_KEYS, data_for_members, withheld

_local = threading.local()


def record(workload: Workload, kind: str, message: str, *, at: datetime, **data: Any) -> None:
    """Add an entry to the workload's timeline and push it once the transaction commits."""
    row = WorkloadEvent.objects.create(
        workload=workload, at=at, kind=kind, message=message, data=data
    )
    push(_message(workload, kind, message, data, seq=row.pk))


class Timeline:
    """Entries for several timelines, stored in one INSERT by `save`, pushed as `record` does."""

    def __init__(self) -> None:
        self.rows: list[WorkloadEvent] = []
        self.payloads: list[dict[str, Any]] = []

    def add(
        self, workload: Workload, kind: str, message: str, *, at: datetime, **data: Any
    ) -> None:
        """`record` an entry; its row waits for `save` (in the same transaction)."""
        row = WorkloadEvent(workload=workload, at=at, kind=kind, message=message, data=data)
        pushed = _message(workload, kind, message, data)
        self.rows.append(row)
        self.payloads.append(pushed.payload)
        push(pushed)

    def save(self) -> None:
        """Store the entries added so far, in the order they came."""
        WorkloadEvent.objects.bulk_create(self.rows)
        # The pushes wait for the commit, so they still take the ids the rows got here.
        for row, payload in zip(self.rows, self.payloads, strict=True):
            payload["seq"] = row.pk
        self.rows, self.payloads = [], []


def _message(
    workload: Workload, kind: str, message: str, data: dict[str, Any], seq: int | None = None
) -> Message:
    """What the live groups of the workload's workspace and quota are sent about an entry.

    Members are not sent the nodes of a borrowed placement (`jobs.visibility`).
    """
    return Message(
        workload.workspace_id,
        workload.quota_id,
        _payload(workload, kind, message, data, seq),
        NODE_KEYS if withheld(data) else frozenset(),
    )


def _payload(
    workload: Workload, kind: str, message: str, data: dict[str, Any], seq: int | None
) -> dict[str, Any]:
    """The websocket form of one entry."""
    return {
        "workload": workload.pk,
        "name": workload.name,
        "kind": kind,
        "message": message,
        "status": workload.status,
        "in_quota": workload.in_quota,
        **data,
        "seq": seq,
    }


def events_after(
    after: int, *, limit: int, members: bool = False, **scope: int
) -> list[dict[str, Any]] | None:
    """Stored events of `scope` past seq `after`, oldest first; None if over `limit`.

    `members`: as a workspace group's members may read them, which the API shows them too
    (no node of a borrowed pod; `jobs.visibility`).
    """
    # Status and in_quota are the workload's now: what a page catching up should show.
    rows = list(
        WorkloadEvent.objects.filter(id__gt=after, **scope)
        .select_related("workload")
        .order_by("id")[: limit + 1]
    )
    if len(rows) > limit:
        return None
    payloads = [_payload(row.workload, row.kind, row.message, row.data, row.pk) for row in rows]
    if not members:
        return payloads
    hidden = borrowed_nodes({row.workload_id for row in rows})
    return [
        data_for_members(payload, hidden.get(row.workload_id, ()))
        for row, payload in zip(rows, payloads, strict=True)
    ]


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


def latest_seq() -> int:
    """The newest event's seq, 0 before any: where a socket's stream starts."""
    newest = WorkloadEvent.objects.order_by("-id").values_list("id", flat=True).first()
    return newest or 0
