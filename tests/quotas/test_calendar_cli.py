"""`tidepool calendar list/add/delete` against a live server: admins only."""

from __future__ import annotations

from typing import Any

import pytest
from django_celery_beat.models import PeriodicTask

from quotas.models import CalendarRule
from tests.cli.conftest import as_json, cli, fails, login  # noqa: F401  (the cli fixture)

pytestmark = pytest.mark.django_db(transaction=True)

ADD = (
    "calendar",
    "add",
    "nightly-loan",
    "--action",
    "rebalance",
    "--quota",
    "Quota 1.2",
    "--to",
    "Quota 1.1",
    "--gpus",
    "32",
    "--cron",
    "0 22 * * 1-5",
    "--timezone",
    "Europe/Berlin",
    "--exclude-date",
    "2026-12-25",
)


def test_an_admin_adds_lists_and_deletes_a_rule(cli: Any) -> None:  # noqa: F811
    login(cli, "admin")
    added = as_json(cli, *ADD)
    assert (added["quota"], added["to"], added["gpus"], added["exclude_dates"]) == (
        "Quota 1.2",
        "Quota 1.1",
        32,
        ["2026-12-25"],
    )
    assert PeriodicTask.objects.filter(pk=CalendarRule.objects.get().periodic_task_id).exists()
    listed = as_json(cli, "calendar", "list", "--quota", "Quota 1.2")
    assert [r["name"] for r in listed] == ["nightly-loan"]
    code, out, _ = cli("calendar", "list")
    assert code == 0 and "nightly-loan" in out and "Europe/Berlin" in out
    code, out, _ = cli("calendar", "delete", "nightly-loan", "--yes")
    assert code == 0 and "Deleted calendar rule nightly-loan." in out
    assert not CalendarRule.objects.exists() and not PeriodicTask.objects.exists()


def test_bad_input_names_the_field(cli: Any) -> None:  # noqa: F811
    login(cli, "admin")
    err = fails(cli, *ADD[:-1], "25/12/2026")
    assert "exclude_dates" in err and "'25/12/2026' is not a date" in err
    assert not CalendarRule.objects.exists()


@pytest.mark.parametrize("user", ["alice", "bob", "carol"])
def test_members_cannot_add_and_see_no_rules(cli: Any, user: str) -> None:  # noqa: F811
    login(cli, "admin")
    as_json(cli, *ADD)
    login(cli, user)
    assert as_json(cli, "calendar", "list") == []
    err = fails(cli, *ADD[:2], "other", *ADD[3:])
    assert "permission" in err.lower() or "platform admin" in err.lower()
    err = fails(cli, "calendar", "delete", "nightly-loan", "--yes")
    assert "nightly-loan" in err
    assert CalendarRule.objects.count() == 1
