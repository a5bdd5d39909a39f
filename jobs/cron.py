"""Cron rules through cronsim, with errors that name the field and reason, in a rule's time zone.

cronsim reads the five fields as Debian cron does (day-of-month OR day-of-week when neither
starts with `*`) and, for a rule at a fixed minute and hour, handles daylight saving as Debian
cron does: a wall time that does not exist fires at the end of the gap, and one that happens
twice fires once, at its first occurrence. This module only adds what cronsim leaves to its
callers: macros, user-facing messages, "strictly after" / "at or before" bounds across a fold,
matching a wall time, and the fields as django-celery-beat's crontab reads them.
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Collection, Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from console.errors import DomainError
from console.numbers import is_digits

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# Each field's label, range and names, for messages only: cronsim does the parsing.
FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, tuple(m.lower() for m in calendar.month_abbr[1:])),
    ("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
CELERY_KEYS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
# The item shapes Celery's crontab parser reads the same way cron does.
_CELERY_ITEM = re.compile(r"^(\*|\d+-\d+)(/\d+)?$|^\d+$")
_EPOCH = datetime(2000, 1, 1)
_SECOND = timedelta(seconds=1)


class CronExpr:
    """A checked 5-field cron expression; firings come back as aware UTC datetimes."""

    def __init__(self, text: str, expanded: str) -> None:
        self.text = text
        self.expanded = expanded  # macros spelled out, as cronsim reads it
        self.fields = expanded.split(" ")
        self._sim = CronSim(expanded, _EPOCH)

    def __str__(self) -> str:
        return self.text

    def matches(self, dt: datetime) -> bool:
        """Whether the rule fires at this wall time (seconds are ignored)."""
        sim = self._sim
        return (
            dt.minute in sim.minutes
            and dt.hour in sim.hours
            and dt.month in sim.months
            and sim.match_day(dt.date())
        )

    def next_after(self, dt: datetime, tz: str | ZoneInfo = "UTC") -> datetime | None:
        """The first firing strictly after dt; None if none within cronsim's 50 years."""
        local = dt.astimezone(zone(tz))
        # From the second pass of a repeated hour, the wall-time walk may first give the first.
        sim = CronSim(self.expanded, local)
        return next((f for f in _utc(sim) if f > dt), None)

    def previous_at_or_before(self, dt: datetime, tz: str | ZoneInfo = "UTC") -> datetime | None:
        """The last firing at or before dt; None if none within cronsim's 50 years."""
        local = dt.astimezone(zone(tz))
        if local.fold:
            # The second pass of a repeated hour: the first pass's wall times up to one offset
            # change later are still at or before dt, so start the walk back from there.
            first, second = local.replace(fold=0).utcoffset(), local.utcoffset()
            local += max((first or timedelta(0)) - (second or timedelta(0)), timedelta(0))
        # cronsim steps back a second before it looks, so start a second late to include dt.
        start = local.replace(microsecond=0) + _SECOND
        sim = CronSim(self.expanded, start, reverse=True)
        return next((f for f in _utc(sim) if f <= dt), None)

    def celery_fields(self) -> dict[str, str]:
        """The fields as django-celery-beat's CrontabSchedule reads them (a superset of firings).

        Celery ANDs day-of-month with day-of-week, so under the OR rule both become `*` and the
        scaling service, which checks the real expression, decides whether a tick fires.
        """
        sim = self._sim
        sets: tuple[Collection[object], ...] = (
            sim.minutes,
            sim.hours,
            sim.days,
            sim.months,
            sim.weekdays,
        )
        fields = [
            _celery_field(i, text, values)
            for i, (text, values) in enumerate(zip(self.fields, sets, strict=True))
        ]
        if not sim.day_and:
            fields[2] = fields[4] = "*"
        return dict(zip(CELERY_KEYS, fields, strict=True))


def _utc(sim: CronSim) -> Iterator[datetime]:
    """cronsim's firings in UTC, where comparisons ignore fold (PEP 495)."""
    return (fired.astimezone(UTC) for fired in sim)


def _celery_field(index: int, text: str, values: Collection[object]) -> str:
    """One field in a form Celery parses the same way: as written, or the expanded list."""
    if text == "*":
        return text
    if any(not isinstance(v, int) or v < 0 for v in values):
        return "*"  # L, LW and # have no crontab form: beat ticks more often, the rule decides
    numbers = {v % 7 if index == 4 else v for v in values if isinstance(v, int)}
    plain = all(_CELERY_ITEM.match(item) for item in text.split(","))
    if plain and not (index == 4 and "7" in re.findall(r"\d+", text)):
        return text
    _, low, high, _ = FIELDS[index]
    if numbers == set(range(low, min(high, 6) + 1 if index == 4 else high + 1)):
        return "*"
    return ",".join(str(v) for v in sorted(numbers))


def zone(name: str | ZoneInfo, *, field: str = "timezone") -> ZoneInfo:
    """The IANA time zone of that name, or a DomainError on field."""
    if isinstance(name, ZoneInfo):
        return name
    if not name or not name.strip():
        raise DomainError("Choose a time zone, such as UTC or Asia/Shanghai.", field=field)
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise DomainError(
            f"Unknown time zone {name!r}: use an IANA name such as UTC, Europe/Berlin or "
            "Asia/Shanghai.",
            field=field,
        ) from None


def parse(expr: str, *, field: str = "cron") -> CronExpr:
    """Parse a 5-field cron expression; a DomainError on field names the bad part and why."""
    return _parse(expr, field)


@functools.lru_cache(maxsize=512)
def _parse(expr: str, field: str) -> CronExpr:
    text = " ".join(expr.split())
    if not text:
        raise DomainError("Enter a cron expression, such as 0 8 * * *.", field=field)
    parts = MACROS.get(text.lower(), text).split(" ")
    if len(parts) != 5:
        raise DomainError(
            f"A cron expression has 5 fields (minute hour day-of-month month day-of-week); "
            f"{text!r} has {len(parts)}.",
            field=field,
        )
    try:
        return CronExpr(text, " ".join(parts))
    except (CronSimError, ValueError):
        raise DomainError(_reason(text, parts), field=field) from None


def _reason(text: str, parts: list[str]) -> str:
    """Why cronsim refused the expression, naming the first bad field."""
    for index, part in enumerate(parts):
        probe = ["*"] * 5
        probe[index] = part
        try:
            CronSim(" ".join(probe), _EPOCH)
        except (CronSimError, ValueError):
            label, low, high, names = FIELDS[index]
            problem = _field_problem(part, label, low, high, names)
            return problem or f"{label} {part!r} is not a valid value."
    day = min(d for d in CronSim(f"0 0 {parts[2]} * *", _EPOCH).days if d > 0)
    months = CronSim(f"0 0 1 {parts[3]} *", _EPOCH).months
    spelled = ", ".join(calendar.month_name[m] for m in sorted(months))
    return f"{text!r} never fires: no day {day} in {spelled}."


def _field_problem(
    text: str, label: str, low: int, high: int, names: tuple[str, ...]
) -> str | None:
    """What is wrong with one field's text that cronsim refused, if it is a common mistake."""
    for item in text.split(","):
        if not item:
            return f"{label} {text!r} has an empty list item."
        span, slash, step = item.partition("/")
        if slash and not is_digits(step):
            return f"{label} step {step!r} in {item!r} is not a whole number."
        if slash and int(step) < 1:
            return f"{label} step in {item!r} must be at least 1."
        ends = [] if span == "*" else span.split("-")
        if len(ends) > 2:
            return f"{label} {item!r} is not a valid value."
        values = []
        for end in ends:
            if end.lower() in names:
                values.append(names.index(end.lower()) + low)
            elif not is_digits(end):
                hint = f" (names: {', '.join(names)})" if names else ""
                return f"{label} {end!r} is not a number{hint}."
            elif not low <= int(end) <= high:
                return f"{label} {int(end)} is out of range {low}-{high}."
            else:
                values.append(int(end))
        if len(values) == 2 and values[0] > values[1]:
            return f"{label} range {span} goes backwards ({values[0]} is after {values[1]})."
    return None
