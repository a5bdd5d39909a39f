"""A small 5-field cron parser (minute hour day-of-month month day-of-week) with time zones.

Firings are computed in the rule's local wall time and returned as aware UTC datetimes.
Daylight saving: a wall time that does not exist (spring forward) fires at the first valid
instant after the gap, so a rule at 02:30 still fires that day; a wall time that happens twice
(fall back) fires once, at its first occurrence (fold=0).

Day-of-month and day-of-week follow Vixie cron: when both are restricted (neither starts with
`*`), a day matching either counts; otherwise a day must match both.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from console.errors import DomainError
from console.numbers import is_digits

# How far ahead (or back) a search looks before it gives up: five years of days.
SEARCH_DAYS = 5 * 366

MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
        start=1,
    )
}
WEEKDAY_NAMES = {
    name: number for number, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])
}
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True)
class _Field:
    """How to read one of the five fields."""

    label: str
    low: int
    high: int
    names: dict[str, int]


FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day of month", 1, 31, {}),
    _Field("month", 1, 12, MONTH_NAMES),
    _Field("day of week", 0, 7, WEEKDAY_NAMES),
)

_ITEM = re.compile(r"^(?P<range>\*|[^-/]+(?:-[^-/]+)?)(?:/(?P<step>[^/]*))?$")
# The item shapes Celery's crontab parser reads the same way we do.
_CELERY_ITEM = re.compile(r"^(\*|\d+-\d+)(/\d+)?$|^\d+$")


@dataclass(frozen=True)
class CronExpr:
    """A parsed cron expression: the set of values each field allows."""

    text: str
    fields: tuple[str, str, str, str, str]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday … 6 = Saturday
    dom_restricted: bool
    dow_restricted: bool

    def __str__(self) -> str:
        return self.text

    def matches_day(self, day: date) -> bool:
        """Whether the rule fires at some time on this (local) date."""
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.dom_restricted and self.dow_restricted:
            return dom or dow
        return dom and dow

    def matches(self, dt: datetime) -> bool:
        """Whether the rule fires at this wall time (its own fields; seconds are ignored)."""
        return dt.minute in self.minutes and dt.hour in self.hours and self.matches_day(dt.date())

    def next_after(self, dt: datetime, tz: str | ZoneInfo = "UTC") -> datetime | None:
        """The first firing strictly after dt, in UTC; None if none within five years."""
        zone_info = zone(tz) if isinstance(tz, str) else tz
        local = dt.astimezone(zone_info)
        start_wall = local.replace(tzinfo=None, second=0, microsecond=0)
        day = start_wall.date()
        for _ in range(SEARCH_DAYS):
            if self.matches_day(day):
                for wall in self._walls(day, start_wall if day == start_wall.date() else None):
                    fired = resolve(wall, zone_info)
                    if fired > dt:
                        return fired
            day = self._next_candidate_day(day)
        return None

    def previous_at_or_before(self, dt: datetime, tz: str | ZoneInfo = "UTC") -> datetime | None:
        """The last firing at or before dt, in UTC; None if none within five years."""
        zone_info = zone(tz) if isinstance(tz, str) else tz
        local = dt.astimezone(zone_info)
        end_wall = local.replace(tzinfo=None, second=0, microsecond=0)
        if local.fold:
            # dt is the second pass through a repeated hour: the first pass's wall times up to
            # one offset change later are still at or before it.
            first = local.replace(fold=0).utcoffset() or timedelta(0)
            second = local.utcoffset() or timedelta(0)
            end_wall += max(first - second, timedelta(0))
        day = end_wall.date()
        for _ in range(SEARCH_DAYS):
            if self.matches_day(day):
                limit = end_wall if day == end_wall.date() else None
                for wall in reversed(list(self._walls(day, None, limit))):
                    fired = resolve(wall, zone_info)
                    if fired <= dt:
                        return fired
            day -= timedelta(days=1)
        return None

    def _walls(
        self, day: date, start: datetime | None = None, end: datetime | None = None
    ) -> Iterator[datetime]:
        """The day's firing wall times in order, from start and up to end (inclusive)."""
        hours: tuple[int, ...] = self.hours
        if start is not None:
            hours = hours[bisect.bisect_left(hours, start.hour) :]
        if end is not None:
            hours = hours[: bisect.bisect_right(hours, end.hour)]
        for hour in hours:
            minutes: tuple[int, ...] = self.minutes
            if start is not None and hour == start.hour:
                minutes = minutes[bisect.bisect_left(minutes, start.minute) :]
            if end is not None and hour == end.hour:
                minutes = minutes[: bisect.bisect_right(minutes, end.minute)]
            for minute in minutes:
                yield datetime(day.year, day.month, day.day, hour, minute)

    def _next_candidate_day(self, day: date) -> date:
        """The next day, jumping straight to the 1st of the next month the rule allows."""
        following = day + timedelta(days=1)
        if following.month in self.months:
            return following
        year, month = following.year, following.month
        for _ in range(12):
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            if month in self.months:
                return date(year, month, 1)
        return following  # unreachable: months is never empty

    def celery_fields(self) -> dict[str, str]:
        """The fields as django-celery-beat's CrontabSchedule reads them (a superset of firings).

        Celery ANDs day-of-month with day-of-week, so under the OR rule both become `*` and the
        scaling service, which checks the real expression, decides whether a tick fires.
        """
        minute, hour, dom, month, dow = (
            self._celery_field(i, values)
            for i, values in enumerate(
                (self.minutes, self.hours, self.days, self.months, self.weekdays)
            )
        )
        if self.dom_restricted and self.dow_restricted:
            dom, dow = "*", "*"
        return {
            "minute": minute,
            "hour": hour,
            "day_of_month": dom,
            "month_of_year": month,
            "day_of_week": dow,
        }

    def _celery_field(self, index: int, values: Collection[int]) -> str:
        """One field in a form Celery parses the same way: as written, or the expanded list."""
        text = self.fields[index]
        spec = FIELDS[index]
        if text == "*":
            return text
        plain = all(_CELERY_ITEM.match(item) for item in text.split(","))
        has_seven = index == 4 and any(n == "7" for n in re.findall(r"\d+", text))
        if plain and not has_seven:
            return text
        full = set(range(7)) if index == 4 else set(range(spec.low, spec.high + 1))
        if set(values) == full:
            return "*"
        return ",".join(str(v) for v in sorted(values))


def zone(name: str, *, field: str = "timezone") -> ZoneInfo:
    """The IANA time zone of that name, or a DomainError on field."""
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


def resolve(wall: datetime, tz: ZoneInfo) -> datetime:
    """The UTC instant of a naive local wall time: fold=0 if repeated, gap end if missing."""
    first = wall.replace(tzinfo=tz).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first
    # In a gap fold=0 uses the offset from before the change, so `first` lies after the
    # transition and fold=1 before it; the transition is the first instant past the wall time.
    low = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    high = first
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(tz).replace(tzinfo=None) > wall:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


@functools.lru_cache(maxsize=512)
def _parse(expr: str, field: str) -> CronExpr:
    text = " ".join(expr.split())
    if not text:
        raise DomainError("Enter a cron expression, such as 0 8 * * *.", field=field)
    expanded = MACROS.get(text.lower(), text)
    parts = expanded.split(" ")
    if len(parts) != 5:
        raise DomainError(
            f"A cron expression has 5 fields (minute hour day-of-month month day-of-week); "
            f"{text!r} has {len(parts)}.",
            field=field,
        )
    sets = [_parse_field(part, spec, field) for part, spec in zip(parts, FIELDS, strict=True)]
    weekdays = frozenset(0 if d == 7 else d for d in sets[4])
    cron = CronExpr(
        text=text,
        fields=(parts[0], parts[1], parts[2], parts[3], parts[4]),
        minutes=tuple(sorted(sets[0])),
        hours=tuple(sorted(sets[1])),
        days=frozenset(sets[2]),
        months=frozenset(sets[3]),
        weekdays=weekdays,
        dom_restricted=not parts[2].startswith("*"),
        dow_restricted=not parts[4].startswith("*"),
    )
    _check_reachable(cron, field)
    return cron


def parse(expr: str, *, field: str = "cron") -> CronExpr:
    """Parse a 5-field cron expression; a DomainError on field names the bad part."""
    return _parse(expr, field)


def _parse_field(text: str, spec: _Field, field: str) -> set[int]:
    """Expand one field (`*`, lists, ranges, steps, names) to its values."""
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise DomainError(f"{spec.label} {text!r} has an empty list item.", field=field)
        match = _ITEM.match(item)
        if not match:
            raise DomainError(f"{spec.label} {item!r} is not a valid value.", field=field)
        span, step_text = match.group("range"), match.group("step")
        if span == "*":
            low, high = spec.low, spec.high
            if spec.label == "day of week":
                high = 6
        elif "-" in span:
            start, end = span.split("-")
            low, high = _value(start, spec, field), _value(end, spec, field)
            if low > high:
                raise DomainError(
                    f"{spec.label} range {span} goes backwards ({low} is after {high}).",
                    field=field,
                )
        else:
            low = _value(span, spec, field)
            # `5/15` means from 5 to the end, every 15 (as most crons read it).
            high = spec.high if step_text is not None else low
        step = 1
        if step_text is not None:
            if not is_digits(step_text):
                raise DomainError(
                    f"{spec.label} step {step_text!r} in {item!r} is not a whole number.",
                    field=field,
                )
            step = int(step_text)
            if step < 1:
                raise DomainError(
                    f"{spec.label} step in {item!r} must be at least 1.",
                    field=field,
                )
        values.update(range(low, high + 1, step))
    return values


def _value(token: str, spec: _Field, field: str) -> int:
    """One number or name of a field, checked against its range."""
    lowered = token.lower()
    if lowered in spec.names:
        return spec.names[lowered]
    if not is_digits(token):
        hint = f" (names: {', '.join(spec.names)})" if spec.names else ""
        raise DomainError(f"{spec.label} {token!r} is not a number{hint}.", field=field)
    number = int(token)
    if not spec.low <= number <= spec.high:
        raise DomainError(
            f"{spec.label} {number} is out of range {spec.low}-{spec.high}.", field=field
        )
    return number


def _check_reachable(cron: CronExpr, field: str) -> None:
    """Refuse an expression that can never fire, such as `0 0 31 2 *`."""
    if cron.dow_restricted and not cron.dom_restricted:
        return  # some weekday always falls on an allowed day of an allowed month
    if cron.dow_restricted and cron.dom_restricted:
        return  # OR: any allowed weekday will do
    longest = max(calendar.monthrange(2024, month)[1] for month in cron.months)
    if min(cron.days) > longest:
        months = ", ".join(calendar.month_name[m] for m in sorted(cron.months))
        raise DomainError(
            f"{cron.text!r} never fires: no day {min(cron.days)} in {months}.", field=field
        )
