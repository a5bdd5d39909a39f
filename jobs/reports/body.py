"""A report's body: any of progress, checkpoint, heartbeat and activity, checked field by field."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

FIELDS = ("progress", "checkpoint", "heartbeat", "activity")
LABEL_MAX = 200  # Workload.checkpoint_label's length
NON_FIELD = "non_field_errors"


class BodyError(Exception):
    """A refused body: the field it concerns and the reason, in words."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Report:
    """What one report says; None (or False) for a signal it does not carry."""

    progress: float | None = None
    checkpoint: str | None = None
    heartbeat: bool = False
    activity: bool = False


def _number(value: Any) -> bool:
    """Whether JSON gave a number (true and false are not numbers here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _progress(value: Any) -> float:
    """A fraction from 0 to 1."""
    if not _number(value) or not math.isfinite(value):
        raise BodyError("progress", f"Progress must be a number from 0 to 1, not {value!r}.")
    if not 0 <= value <= 1:
        raise BodyError("progress", f"Progress must be from 0 to 1, not {value}.")
    return float(value)


def _label(value: Any) -> str:
    """A checkpoint's label: text of 1 to 200 characters, or a number (a step)."""
    if _number(value):
        if isinstance(value, float) and not math.isfinite(value):
            raise BodyError("checkpoint", f"A checkpoint label cannot be {value}.")
        return _label(str(value))
    if not isinstance(value, str):
        raise BodyError(
            "checkpoint", f"A checkpoint label is text or a number, not {type(value).__name__}."
        )
    if not value.strip():
        raise BodyError("checkpoint", "A checkpoint label cannot be empty.")
    if len(value) > LABEL_MAX:
        raise BodyError(
            "checkpoint",
            f"A checkpoint label has at most {LABEL_MAX} characters, not {len(value)}.",
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise BodyError("checkpoint", "A checkpoint label cannot hold control characters.")
    return value


def _true(field: str, value: Any) -> bool:
    """A signal that is sent as true."""
    if value is not True:
        raise BodyError(field, f"Send {field} as true, or leave it out; not {value!r}.")
    return True


def report_parse(raw: bytes) -> Report:
    """The report a request body holds; BodyError names the field and the reason."""
    try:
        data = json.loads(raw) if raw.strip() else None
    except (ValueError, UnicodeDecodeError) as e:
        raise BodyError(NON_FIELD, f"The body is not JSON: {e}.") from e
    if not isinstance(data, dict) or not data:
        raise BodyError(
            NON_FIELD, "Send a JSON object with progress, checkpoint, heartbeat or activity."
        )
    for key in data:
        if key not in FIELDS:
            raise BodyError(key, "Unknown field: send progress, checkpoint, heartbeat or activity.")
    return Report(
        progress=_progress(data["progress"]) if "progress" in data else None,
        checkpoint=_label(data["checkpoint"]) if "checkpoint" in data else None,
        heartbeat=_true("heartbeat", data["heartbeat"]) if "heartbeat" in data else False,
        activity=_true("activity", data["activity"]) if "activity" in data else False,
    )
