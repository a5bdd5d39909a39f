"""Writes for what-if replays: ask for one (checked, then queued) and run it in the background."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from console import clock
from console.errors import DomainError
from whatif.changes import ChangeError, validate_changes
from whatif.choices import RunStatus, Window
from whatif.models import WhatIf
from whatif.selectors import change_names

log = logging.getLogger(__name__)
WINDOWS = {Window.DAY: timedelta(hours=24), Window.WEEK: timedelta(days=7)}
MAX_WINDOW = timedelta(days=31)
PROGRESS_STEP = 0.02  # store progress every 2 points, not every call


def window_bounds(
    window: str, start: datetime | None, end: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """The window's start and end; a DomainError names the field that is wrong."""
    if window in WINDOWS:
        return now - WINDOWS[Window(window)], now
    if window != Window.CUSTOM:
        raise DomainError("Choose 24h, 7d or custom.", field="window")
    if start is None:
        raise DomainError("A custom window needs a start.", field="start")
    if end is None:
        raise DomainError("A custom window needs an end.", field="end")
    if end <= start:
        raise DomainError("The end must come after the start.", field="end")
    if end > now:
        raise DomainError("The end must not be in the future.", field="end")
    if end - start > MAX_WINDOW:
        raise DomainError("A window is at most 31 days long.", field="start")
    return start, end


def _check(changes: Any) -> list[dict[str, Any]]:
    """The changes validated against what exists and applied once to the tree as it is now."""
    from jobs.bridge.snapshot import build
    from whatif.replay.apply import setup
    from whatif.replay.types import Recording

    try:
        checked = validate_changes(changes, change_names())
    except ChangeError as exc:
        raise DomainError(str(exc), field="changes") from None
    now = clock.now()
    snap = build(now).snapshot
    stub = Recording(now.timestamp(), now.timestamp(), now.timestamp(), snap.nodes, snap.quotas, ())
    try:
        setup(stub, checked)
    except ValueError as exc:
        raise DomainError(str(exc), field="changes") from None
    return checked


@transaction.atomic
def whatif_create(
    *,
    actor: Any,
    window: str,
    changes: Any,
    now: datetime,
    start: datetime | None = None,
    end: datetime | None = None,
) -> WhatIf:
    """Check the window and the changes, store the request and queue its replay."""
    first, last = window_bounds(window, start, end, now)
    checked = _check(changes)
    run = WhatIf.objects.create(
        created_by=actor if getattr(actor, "is_authenticated", False) else None,
        created_at=now,
        window=window,
        window_start=first,
        window_end=last,
        changes=checked,
    )
    pk = run.pk
    transaction.on_commit(lambda: whatif_dispatch(pk))
    return run


def whatif_dispatch(pk: int) -> None:
    """A Celery task in the distributed mode; a background thread of this process when embedded."""
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        from whatif.tasks import whatif_run as task

        task.delay(pk)
        return

    def work() -> None:
        try:
            whatif_run(whatif_id=pk)
        except Exception:
            log.exception("what-if %s failed", pk)
        finally:
            connection.close()

    threading.Thread(target=work, name=f"what-if-{pk}", daemon=True).start()


def _progress(pk: int) -> Any:
    last = [0.0]

    def report(fraction: float) -> None:
        if fraction - last[0] >= PROGRESS_STEP:
            last[0] = fraction
            WhatIf.objects.filter(pk=pk, status=RunStatus.RUNNING).update(progress=fraction)

    return report


def whatif_run(*, whatif_id: int) -> WhatIf | None:
    """Replay a queued what-if once: claim it, replay both runs, store the result or the error.

    Claimed by a conditional update, so a retried or duplicated task replays it only once.
    """
    from whatif.recording import record_window
    from whatif.replay.compare import what_if

    claimed = WhatIf.objects.filter(pk=whatif_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=clock.now(), progress=0.0
    )
    if not claimed:
        return None
    run = WhatIf.objects.get(pk=whatif_id)
    try:
        rec = record_window(run.window_start, run.window_end, start_delay=settings.SIM_START_DELAY)
        result = what_if(rec, run.changes, _progress(run.pk))
    except Exception as exc:
        # a refused change names itself; anything else still ends the run, and is logged
        error = str(exc) if isinstance(exc, ValueError) else "The replay failed; see the log."
        WhatIf.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
            status=RunStatus.FAILED, error=error, finished_at=clock.now()
        )
        if not isinstance(exc, ValueError):
            raise
    else:
        WhatIf.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
            status=RunStatus.DONE, result=result, progress=1.0, finished_at=clock.now()
        )
    run.refresh_from_db()
    return run
