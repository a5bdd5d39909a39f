"""Cron in words: each shape the rule form accepts that has a plain phrase, and the fallback."""

from __future__ import annotations

import pytest

from console.cron import describe

PHRASED = [
    ("0 8 * * *", "every day at 08:00"),
    ("0 22 * * 1-5", "weekdays at 22:00"),
    ("30 9 * * mon-fri", "weekdays at 09:30"),
    ("0 8 * * 6,0", "weekends at 08:00"),
    ("0 8 * * sat,sun", "weekends at 08:00"),
    ("0 9 * * mon,fri", "every Monday and Friday at 09:00"),
    ("0 9 * * 7", "every Sunday at 09:00"),
    ("0 8,20 * * *", "every day at 08:00 and 20:00"),
    ("0 */5 * * *", "every day at 00:00, 05:00, 10:00, 15:00 and 20:00"),
    ("0 0 1 * *", "on day 1 of every month at 00:00"),
    ("0 0 1,15 * *", "on days 1 and 15 of every month at 00:00"),
    ("0 0 1 1 *", "on day 1 of January at 00:00"),
    ("0 8 * 6-8 *", "every day in June, July and August at 08:00"),
    ("* * * * *", "every minute"),
    ("*/1 * * * *", "every minute"),
    ("*/15 * * * *", "every 15 minutes"),
    ("*/15 * * * 1-5", "every 15 minutes on weekdays"),
    ("0 * * * *", "every hour"),
    ("30 * * * *", "every hour at :30"),
    ("0 */2 * * *", "every 2 hours"),
    ("5 */2 * * 1-5", "every 2 hours at :05 on weekdays"),
    ("0 8-18 * * 1-5", "every hour from 08:00 to 18:00 on weekdays"),
    ("0 0,1,2,3,4,5,6 * * *", "every hour from 00:00 to 06:00"),
    ("@daily", "every day at 00:00"),
    ("@weekly", "every Sunday at 00:00"),
    ("@hourly", "every hour"),
    ("  0   8 * * *  ", "every day at 08:00"),
]
RAW = [
    "0 8 1 * 1",  # day of month OR day of week: no short phrase says it plainly
    "0 8 L * *",
    "0 8 * * 5L",
    "*/7 * * * *",  # jumps from :56 to :00, so not "every 7 minutes"
    "*/5 8 * * *",
    "7,8 * * * *",
    "0 0,1,2,3,4,5,9 * * *",  # seven scattered hours
]


@pytest.mark.parametrize(("expr", "words"), PHRASED, ids=[p[0].strip() for p in PHRASED])
def test_describe_phrases_common_shapes(expr: str, words: str) -> None:
    assert describe(expr) == words


@pytest.mark.parametrize("expr", RAW, ids=RAW)
def test_describe_falls_back_to_the_expression(expr: str) -> None:
    assert describe(expr) == expr


def test_describe_leaves_an_invalid_expression_as_written() -> None:
    assert describe("0 25 * * *") == "0 25 * * *"
