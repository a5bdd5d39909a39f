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


# In words ------------------------------------------------------------------------------------

_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_WEEKDAYS = frozenset(range(1, 6))
_WEEKENDS = frozenset({0, 6})


def describe(expr: str) -> str:
    """The expression in words: "every day at 08:00", "weekdays at 22:00", "every 15 minutes".

    It phrases the common shapes of the five fields (fixed times, every n minutes or hours,
    weekdays, weekends, named days, days of the month, months). Anything else, such as a
    day-of-month together with a day-of-week (cron's OR rule), L, W or #, comes back as the
    expression itself, so what is shown is never a wrong paraphrase.
    """
    try:
        cron = parse(expr)
    except DomainError:
        return expr
    sim = cron._sim
    if any(not isinstance(v, int) or v < 0 for v in (*sim.days, *sim.weekdays)):
        return cron.text
    minute, hour, dom, month, dow = cron.fields
    time = _time_words(minute, hour, sorted(sim.minutes), sorted(sim.hours))
    days = _day_words(dom, month, dow, sim)
    if time is None or days is None:
        return cron.text
    (fixed, time_text), (lead, on) = time, days
    if fixed:
        return f"{lead} at {time_text}"
    return f"{time_text} {on}".strip()


def _and(items: list[str]) -> str:
    """a; a and b; a, b and c."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _every(values: list[int], low: int, high: int) -> int | None:
    """n when the values are low, low+n, ... up to high and n divides the range evenly (a
    `*/n` field that is truly "every n"), else None: */7 minutes jumps from :56 to :00."""
    if len(values) < 2 or values[0] != low:
        return None
    step = values[1] - values[0]
    even = (high - low + 1) % step == 0
    return step if even and values == list(range(low, high + 1, step)) else None


def _count(step: int, unit: str) -> str:
    """every minute; every 15 minutes."""
    return f"every {unit}" if step == 1 else f"every {step} {unit}s"


def _time_words(
    minute: str, hour: str, minutes: list[int], hours: list[int]
) -> tuple[bool, str] | None:
    """(whether it names fixed times, the words) for the minute and hour fields, or None."""
    if minute == "*" and hour == "*":
        return False, "every minute"
    if hour == "*" and (step := _every(minutes, 0, 59)) is not None:
        return False, _count(step, "minute")
    if len(minutes) != 1:
        return None
    (m,) = minutes
    past = "" if m == 0 else f" at :{m:02d}"
    if hour == "*":
        return False, f"every hour{past}"
    if (step := _every(hours, 0, 23)) is not None:
        return False, f"{_count(step, 'hour')}{past}"
    if len(hours) > 2 and hours == list(range(hours[0], hours[-1] + 1)):
        return False, f"every hour from {hours[0]:02d}:{m:02d} to {hours[-1]:02d}:{m:02d}"
    if len(hours) <= 6:
        return True, _and([f"{h:02d}:{m:02d}" for h in hours])
    return None


def _day_words(dom: str, month: str, dow: str, sim: CronSim) -> tuple[str, str] | None:
    """(the days leading a sentence, the same after a time) for the day fields, or None."""
    months = "" if month == "*" else _and([calendar.month_name[m] for m in sorted(sim.months)])
    if dom != "*" and dow != "*":
        return None  # cron fires on either; no short phrase says that plainly
    if dom != "*":
        days = sorted(sim.days)
        numbers = f"day {days[0]}" if len(days) == 1 else f"days {_and([str(d) for d in days])}"
        text = f"on {numbers} of {months or 'every month'}"
        return text, text
    weekdays = {d % 7 for d in sim.weekdays if isinstance(d, int)}  # L and # left above
    within = f" in {months}" if months else ""
    if dow == "*" or len(weekdays) == 7:
        return f"every day{within}", within.strip()
    if weekdays == _WEEKDAYS:
        lead = "weekdays"
    elif weekdays == _WEEKENDS:
        lead = "weekends"
    else:
        names = [_DAY_NAMES[d] for d in sorted(weekdays, key=lambda d: (d + 6) % 7)]
        return f"every {_and(names)}{within}", f"on {_and(names)}{within}"
    return f"{lead}{within}", f"on {lead}{within}"
