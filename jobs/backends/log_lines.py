"""Log lines as both backends give them: an RFC 3339 UTC timestamp, a space, the text."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime


class LogsUnavailable(Exception):
    """No lines to show, and why, in words a user reads (not started yet, gone, unreachable)."""


def log_line(at: datetime, text: str) -> str:
    """One line stamped as `kubectl logs --timestamps` stamps it."""
    return f"{at.astimezone(UTC).replace(tzinfo=None).isoformat(timespec='microseconds')}Z {text}"


def line_time(line: str) -> datetime | None:
    """When a line was written (None for a line without a leading timestamp)."""
    stamp, _, _ = line.partition(" ")
    try:
        # Kubernetes writes nanoseconds: fromisoformat keeps the first six digits.
        at = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def lines_after(lines: Iterable[str], since: datetime | None, tail: int) -> list[str]:
    """The last `tail` of `lines` written after `since` (a line without a time is kept)."""
    kept = [
        line for line in lines if since is None or (at := line_time(line)) is None or at > since
    ]
    return kept[-tail:]
