"""Cron rules through cronsim: fields, errors naming the bad part, firings across DST."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console.cron import parse, zone
from console.errors import DomainError


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def firings(expr: str, after: datetime, count: int) -> list[datetime]:
    cron, found = parse(expr), [after]
    while len(found) <= count:
        nxt = cron.next_after(found[-1], "UTC")
        assert nxt is not None
        found.append(nxt)
    return found[1:]


# 2025-06-02 is a Monday.
VALID = [
    ("0 8 * * *", [utc(2025, 6, 2, 8), utc(2025, 6, 3, 8)]),
    ("*/15 * * * *", [utc(2025, 6, 2, 0, 15), utc(2025, 6, 2, 0, 30), utc(2025, 6, 2, 0, 45)]),
    ("0 1-5/2 * * *", [utc(2025, 6, 2, 1), utc(2025, 6, 2, 3), utc(2025, 6, 2, 5)]),
    ("0,30 9-17 * * *", [utc(2025, 6, 2, 9), utc(2025, 6, 2, 9, 30), utc(2025, 6, 2, 10)]),
    ("5/20 * * * *", [utc(2025, 6, 2, 0, 5), utc(2025, 6, 2, 0, 25), utc(2025, 6, 2, 0, 45)]),
    ("0 0 1 jan,Jul *", [utc(2025, 7, 1), utc(2026, 1, 1)]),
    ("0 0 * * mon-fri", [utc(2025, 6, 3), utc(2025, 6, 4), utc(2025, 6, 5), utc(2025, 6, 6)]),
    ("0 0 * * 7", [utc(2025, 6, 8), utc(2025, 6, 15)]),
    ("0 0 * * 5-7", [utc(2025, 6, 6), utc(2025, 6, 7), utc(2025, 6, 8), utc(2025, 6, 13)]),
    ("0 0 * * SAT,sun", [utc(2025, 6, 7), utc(2025, 6, 8), utc(2025, 6, 14)]),
    ("@daily", [utc(2025, 6, 3), utc(2025, 6, 4)]),
    ("  0   8 *  * *  ", [utc(2025, 6, 2, 8)]),
]


@pytest.mark.parametrize(("expr", "expected"), VALID, ids=[v[0].strip() for v in VALID])
def test_parse_reads_fields_as_cron_does(expr: str, expected: list[datetime]) -> None:
    assert firings(expr, utc(2025, 6, 2), len(expected)) == expected


INVALID = [
    ("", "Enter a cron expression"),
    ("0 8 * *", "has 4"),
    ("0 8 * * * *", "has 6"),
    ("61 * * * *", "minute 61 is out of range 0-59"),
    ("0 24 * * *", "hour 24 is out of range 0-23"),
    ("0 0 0 * *", "day of month 0 is out of range 1-31"),
    ("0 0 32 * *", "day of month 32 is out of range 1-31"),
    ("0 0 * 13 *", "month 13 is out of range 1-12"),
    ("0 0 * * 8", "day of week 8 is out of range 0-7"),
    ("0 0 * foo *", "month 'foo' is not a number"),
    ("0 0 * * mon-xyz", "day of week 'xyz' is not a number"),
    ("0 mon * * *", "hour 'mon' is not a number"),
    ("*/0 * * * *", "minute step in '*/0' must be at least 1"),
    ("*/x * * * *", "minute step 'x'"),
    ("0 5-1 * * *", "hour range 5-1 goes backwards"),
    ("0,,5 * * * *", "minute '0,,5' has an empty list item"),
    ("1-2-3 * * * *", "minute '1-2-3' is not a valid value"),
    ("0 0 31 2 *", "never fires"),
    ("0 0 31 apr,6 *", "never fires: no day 31 in April, June"),
    ("0 0 * * mon#9", "day of week 'mon#9' is not a number"),
    ("0 0 * * 1 2", "has 6"),  # cronsim's seconds field is not offered
]


@pytest.mark.parametrize(("expr", "message"), INVALID, ids=[v[0] or "empty" for v in INVALID])
def test_parse_refuses_with_the_bad_part_named(expr: str, message: str) -> None:
    with pytest.raises(DomainError) as error:
        parse(expr, field="exclude_cron")
    assert message in error.value.message
    assert error.value.field == "exclude_cron"


def test_leap_day_is_accepted() -> None:
    cron = parse("0 0 29 2 *")
    assert cron.next_after(utc(2025, 1, 1), "UTC") == utc(2028, 2, 29)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "Not a zone"])
def test_unknown_time_zone_is_refused(name: str) -> None:
    with pytest.raises(DomainError) as error:
        zone(name)
    assert error.value.field == "timezone"


def test_matches_uses_the_wall_time_given() -> None:
    cron = parse("*/15 9-17 * * mon-fri")
    assert cron.matches(datetime(2025, 6, 2, 9, 45))  # a Monday
    assert not cron.matches(datetime(2025, 6, 2, 9, 50))
    assert not cron.matches(datetime(2025, 6, 1, 9, 45))  # a Sunday


def test_day_of_month_or_day_of_week_when_both_restricted() -> None:
    cron = parse("0 0 13 * fri")
    assert cron.matches(datetime(2025, 6, 13))  # Friday the 13th
    assert cron.matches(datetime(2025, 6, 20))  # any Friday
    assert cron.matches(datetime(2025, 7, 13))  # any 13th (a Sunday)
    assert not cron.matches(datetime(2025, 6, 14))


def test_star_step_day_of_month_is_anded_with_day_of_week() -> None:
    cron = parse("0 0 */2 * 1")  # Vixie cron: a field starting with * is unrestricted
    assert cron.matches(datetime(2025, 6, 9))  # Monday the 9th
    assert not cron.matches(datetime(2025, 6, 2))  # Monday the 2nd
    assert not cron.matches(datetime(2025, 6, 11))  # Wednesday the 11th


def test_shanghai_eight_am_is_midnight_utc() -> None:
    cron = parse("0 8 * * *")
    assert cron.next_after(utc(2025, 6, 1, 12), "Asia/Shanghai") == utc(2025, 6, 2, 0)
    assert cron.previous_at_or_before(utc(2025, 6, 1, 12), "Asia/Shanghai") == utc(2025, 6, 1, 0)


def test_next_is_strictly_after_and_previous_is_at_or_before() -> None:
    cron = parse("0 8 * * *")
    assert cron.next_after(utc(2025, 6, 1, 8), "UTC") == utc(2025, 6, 2, 8)
    assert cron.previous_at_or_before(utc(2025, 6, 1, 8), "UTC") == utc(2025, 6, 1, 8)
    assert cron.previous_at_or_before(utc(2025, 6, 1, 7, 59, 59), "UTC") == utc(2025, 5, 31, 8)


def test_next_skips_months_and_years_quickly() -> None:
    cron = parse("0 0 1 jan *")
    assert cron.next_after(utc(2025, 1, 1, 0, 1), "UTC") == utc(2026, 1, 1)
    assert cron.previous_at_or_before(utc(2025, 12, 31), "UTC") == utc(2025, 1, 1)


NEW_YORK = [
    # November 2 2025 01:59 EDT → 01:00 EST: the days around it.
    (utc(2025, 11, 1, 0), utc(2025, 11, 1, 12)),
    (utc(2025, 11, 1, 12), utc(2025, 11, 2, 13)),
    (utc(2025, 11, 2, 13), utc(2025, 11, 3, 13)),
    # March 9 2025 02:00 EST → 03:00 EDT.
    (utc(2025, 3, 8, 0), utc(2025, 3, 8, 13)),
    (utc(2025, 3, 8, 13), utc(2025, 3, 9, 12)),
    (utc(2025, 3, 9, 12), utc(2025, 3, 10, 12)),
    (utc(2025, 7, 1), utc(2025, 7, 1, 12)),  # summer
    (utc(2025, 1, 15), utc(2025, 1, 15, 13)),  # winter
]


@pytest.mark.parametrize(
    ("after", "expected"), NEW_YORK, ids=[a.strftime("%Y-%m-%d %H:%M") for a, _ in NEW_YORK]
)
def test_new_york_eight_am_follows_daylight_saving(after: datetime, expected: datetime) -> None:
    cron = parse("0 8 * * *")
    assert cron.next_after(after, "America/New_York") == expected
    assert cron.previous_at_or_before(expected, "America/New_York") == expected
    assert cron.previous_at_or_before(after, "America/New_York") < expected


def test_missing_local_time_fires_at_the_end_of_the_gap() -> None:
    cron = parse("30 2 * * *")  # 02:30 does not exist in New York on March 9 2025
    assert cron.next_after(utc(2025, 3, 9), "America/New_York") == utc(2025, 3, 9, 7)  # 03:00 EDT
    assert cron.next_after(utc(2025, 3, 9, 7), "America/New_York") == utc(2025, 3, 10, 6, 30)
    every = parse("*/15 2-3 * * *")
    firings = [utc(2025, 3, 9, 6, 59)]
    while len(firings) < 5:
        nxt = every.next_after(firings[-1], "America/New_York")
        assert nxt is not None
        firings.append(nxt)
    # 02:00-02:45 all land on 03:00 EDT, which fires once; then 03:15, 03:30, 03:45.
    assert firings[1:] == [
        utc(2025, 3, 9, 7),
        utc(2025, 3, 9, 7, 15),
        utc(2025, 3, 9, 7, 30),
        utc(2025, 3, 9, 7, 45),
    ]


def test_repeated_local_time_fires_once() -> None:
    cron = parse("30 1 * * *")  # 01:30 happens twice in New York on November 2 2025
    first = cron.next_after(utc(2025, 11, 2), "America/New_York")
    assert first == utc(2025, 11, 2, 5, 30)  # 01:30 EDT
    assert cron.next_after(first, "America/New_York") == utc(2025, 11, 3, 6, 30)
    # During the second 01:xx (EST) the latest firing is still the first 01:30.
    assert cron.previous_at_or_before(utc(2025, 11, 2, 6, 40), "America/New_York") == first


def test_every_minute_previous_is_cheap() -> None:
    cron = parse("* * * * *")
    assert cron.previous_at_or_before(utc(2025, 6, 1, 0, 5, 30), "UTC") == utc(2025, 6, 1, 0, 5)
    assert cron.next_after(utc(2025, 6, 1, 23, 59, 30), "UTC") == utc(2025, 6, 2)


CELERY = [
    ("0 8 * * *", ("0", "8", "*", "*", "*")),
    ("*/15 1-5/2 * * 1-5", ("*/15", "1-5/2", "*", "*", "1-5")),
    ("5/20 * * jan,feb sun", ("5,25,45", "*", "*", "1,2", "0")),
    ("0 0 * * 5-7", ("0", "0", "*", "*", "0,5,6")),
    ("0 0 * * 0,7", ("0", "0", "*", "*", "0")),
    ("0 0 1 * mon", ("0", "0", "*", "*", "*")),  # OR: beat ticks daily, the rule decides
    ("0 0 1,15 * *", ("0", "0", "1,15", "*", "*")),
    ("0 0 L * *", ("0", "0", "*", "*", "*")),  # no crontab form: beat ticks daily
    ("0 9 * * mon#1", ("0", "9", "*", "*", "*")),
]


@pytest.mark.parametrize(("expr", "fields"), CELERY, ids=[c[0] for c in CELERY])
def test_celery_fields_read_the_same_in_celery(expr: str, fields: tuple[str, ...]) -> None:
    keys = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
    assert parse(expr).celery_fields() == dict(zip(keys, fields, strict=True))
