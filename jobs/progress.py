"""How far a training job is, and how often it restarted, said the same way everywhere (the
job list, the job page, the timeline's Resumed entry)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.choices import Status

if TYPE_CHECKING:
    from jobs.models import Workload

NO_CHECKPOINT = "no checkpoint reported"


def percent(progress: float, total_work: float | None, status: str = "") -> int | None:
    """Whole percent of the work done, rounded down (a job shows 100% only once done); a
    Succeeded job is done whatever its last progress report said."""
    if status == Status.SUCCEEDED:
        return 100
    if not total_work:
        return None
    return max(0, min(int(100 * progress / total_work), 100))


def times(count: int, noun: str) -> str:
    """'1 fault', '3 preemptions'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def restarts_text(restarts: int, failures: int, max_restarts: int) -> str:
    """'restarted 4 times: 1 fault of 3 allowed, 3 preemptions', or 'not restarted'.

    Faults count against max_restarts; preemptions (requeued by the scheduler) do not.
    """
    if restarts <= 0:
        return "not restarted"
    preemptions = max(restarts - failures, 0)
    parts = []
    if failures:
        parts.append(f"{times(failures, 'fault')} of {max_restarts} allowed")
    if preemptions:
        parts.append(times(preemptions, "preemption"))
    return f"restarted {'once' if restarts == 1 else f'{restarts} times'}: {', '.join(parts)}"


def lost_text(workload: Workload, lost: float) -> str:
    """'Work lost since the last checkpoint (step-600): 0.42 GPU-hours.', or since the start
    when no checkpoint was reported."""
    label = workload.checkpoint_label
    where = f"the last checkpoint ({label})" if label else f"the start ({NO_CHECKPOINT})"
    return f"Work lost since {where}: {lost / 3600:.2f} GPU-hours."
