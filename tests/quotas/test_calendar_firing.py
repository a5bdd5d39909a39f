"""Quota calendar rules fire at their local times across DST, skip exclude-dates, apply once,
refuse what would break the tree (changing nothing and saying why), and leave audit records
and job events behind."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from console.demo import Demo
from jobs.choices import EventKind
from jobs.models import Workload, WorkloadEvent
from quotas import tasks
from quotas.choices import CalendarOutcome
from quotas.models import CalendarRule, Quota, QuotaAudit
from quotas.services.calendar import (
    calendar_rule_create,
    calendar_rule_fire,
    calendar_rules_fire_due,
)
from quotas.services.quotas import quota_rebalance
from tests.jobs import conftest as control
from tests.quotas.builders import dump, min_gpus

pytestmark = pytest.mark.django_db

clock, sim, tick, submit = control.clock, control.sim, control.tick, control.submit


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _loan(demo: Demo, *, cron: str, timezone: str, gpus: int = 1, **extra: Any) -> CalendarRule:
    """A rule moving GPUs of guarantee from Quota 1.2 (team C) to Quota 1.1 (team B)."""
    return calendar_rule_create(
        name=extra.pop("name", "loan"),
        cron=cron,
        timezone=timezone,
        action="rebalance",
        quota=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        gpus=gpus,
        now=extra.pop("now", _at("2026-10-20T00:00")),
        **extra,
    )


def _fire_at(rule: CalendarRule, text: str) -> bool:
    return calendar_rule_fire(rule=rule, now=_at(text))


def test_a_berlin_rule_fires_at_22_local_on_both_sides_of_the_october_dst_change(
    demo: Demo,
) -> None:
    # Berlin is UTC+2 until 2026-10-25 03:00 local, then UTC+1: 22:00 local is 20:00 UTC on
    # the 24th and 21:00 UTC on the 25th.
    rule = _loan(demo, cron="0 22 * * *", timezone="Europe/Berlin", now=_at("2026-10-24T12:00"))
    assert not _fire_at(rule, "2026-10-24T19:59")
    assert _fire_at(rule, "2026-10-24T20:00")
    assert min_gpus("Quota 1.1") == 49 and min_gpus("Quota 1.2") == 79
    assert not _fire_at(rule, "2026-10-25T20:59")  # 21:59 local: not yet
    assert _fire_at(rule, "2026-10-25T21:00")
    assert min_gpus("Quota 1.1") == 50 and min_gpus("Quota 1.2") == 78
    rule.refresh_from_db()
    assert rule.last_fired_at == _at("2026-10-25T21:00")
    assert rule.last_outcome == CalendarOutcome.OK
    assert rule.last_run_result == (
        "Moved 1 GPU of guarantee on A100-80G from Quota 1.2 to Quota 1.1: "
        "Quota 1.2 79 → 78, Quota 1.1 49 → 50."
    )


def test_a_rule_in_the_repeated_hour_fires_once_on_the_night_clocks_go_back(demo: Demo) -> None:
    # 02:30 happens twice in Berlin on 2026-10-25 (00:30 and 01:30 UTC): one firing.
    rule = _loan(demo, cron="30 2 * * *", timezone="Europe/Berlin")
    assert _fire_at(rule, "2026-10-25T00:30")
    assert not _fire_at(rule, "2026-10-25T01:30")
    assert not _fire_at(rule, "2026-10-25T02:30")
    assert min_gpus("Quota 1.1") == 49


def test_an_exclude_date_is_the_local_date_and_skips_only_that_firing(demo: Demo) -> None:
    # 22:00 in New York (EDT, UTC-4) is 02:00 UTC the next day: the excluded local date
    # 2026-10-26 is the firing at 2026-10-27T02:00 UTC.
    rule = _loan(demo, cron="0 22 * * *", timezone="America/New_York", exclude_dates=["2026-10-26"])
    assert _fire_at(rule, "2026-10-26T02:00")  # the 25th, local
    assert not _fire_at(rule, "2026-10-27T02:00")  # the 26th: excluded
    rule.refresh_from_db()
    assert rule.last_outcome == CalendarOutcome.SKIPPED
    assert rule.last_run_result == "Skipped: 2026-10-26 is an exclude-date."
    assert min_gpus("Quota 1.1") == 49
    assert _fire_at(rule, "2026-10-28T02:00")  # the 27th
    assert min_gpus("Quota 1.1") == 50


def test_a_new_york_rule_follows_the_november_dst_change(demo: Demo) -> None:
    # New York leaves EDT on 2026-11-01: 22:00 local is 02:00 UTC, then 03:00 UTC.
    rule = _loan(demo, cron="0 22 * * *", timezone="America/New_York")
    assert _fire_at(rule, "2026-11-01T02:00")  # Oct 31, EDT
    assert not _fire_at(rule, "2026-11-02T02:59")  # Nov 1, 21:59 EST
    assert _fire_at(rule, "2026-11-02T03:00")
    assert min_gpus("Quota 1.1") == 50


def test_two_workers_firing_the_same_due_time_apply_it_once(demo: Demo) -> None:
    rule = _loan(demo, cron="0 22 * * *", timezone="UTC", gpus=32)
    # Both workers loaded the rule before either fired: each holds the old watermark.
    first = CalendarRule.objects.get(pk=rule.pk)
    second = CalendarRule.objects.get(pk=rule.pk)
    now = _at("2026-10-21T22:00:05")
    assert calendar_rule_fire(rule=first, now=now)
    assert not calendar_rule_fire(rule=second, now=now)
    # Beat's task and the runner's sweep at the same tick change nothing more.
    assert calendar_rules_fire_due(now=now) == 0
    assert min_gpus("Quota 1.1") == 80 and min_gpus("Quota 1.2") == 48
    assert QuotaAudit.objects.filter(via="calendar rule loan").count() == 2  # source, target


def test_beats_task_fires_the_rule_through_the_same_service(demo: Demo, clock: Any) -> None:
    rule = _loan(demo, cron="0 7 * * *", timezone="UTC", now=clock.now())
    # The manual clock reads 2026-12-01 06:00; the rule's 07:00 is not yet due.
    assert tasks.calendar_rule_fire(rule.pk) is False
    clock.advance(3600)
    assert tasks.calendar_rule_fire(rule.pk) is True
    assert tasks.calendar_rules_due() == 0
    assert tasks.calendar_rule_fire(rule.pk + 1000) is False  # a deleted rule's stale tick
    assert min_gpus("Quota 1.1") == 49


def test_a_firing_the_tree_would_refuse_changes_nothing_and_says_why(
    demo: Demo, admin: Any, login: Callable[..., Any]
) -> None:
    # Scale Quota 1.1 to 80 at 22:00; meanwhile its sibling Quota 1.2 still holds 80 of
    # Quota 1's 128, so the children would need 160.
    rule = calendar_rule_create(
        name="b-to-80",
        cron="0 22 * * *",
        timezone="UTC",
        action="scale",
        quota=demo.quotas["Quota 1.1"],
        gpus=80,
        now=_at("2026-10-20T00:00"),
    )
    before = dump()
    assert not _fire_at(rule, "2026-10-21T22:00")
    assert dump() == before  # amounts, versions, audit: untouched
    rule.refresh_from_db()
    assert rule.last_outcome == CalendarOutcome.FAILED
    assert rule.last_run_result == (
        "Did not scale Quota 1.1 to 80 GPUs guaranteed on A100-80G: Quota 1 has 128 GPUs on "
        "A100-80G and its children would need 160 GPUs (Quota 1.1 80 GPUs + Quota 1.2 80 GPUs)."
        " At most 48 GPUs fit for Quota 1.1."
    )
    # The failure is handled: the same due time does not retry, the next one may.
    assert not _fire_at(rule, "2026-10-21T22:30")
    page = login(admin).get("/quotas/").content.decode()
    assert 'data-testid="calendar-failure"' in page
    assert "Calendar rule" in page and "b-to-80" in page and "160 GPUs" in page
    calendar = login(admin).get("/quotas/calendar/").content.decode()
    assert "160 GPUs" in calendar and 'data-outcome="failed"' in calendar


def test_a_move_larger_than_the_givers_guarantee_fails_with_the_numbers(demo: Demo) -> None:
    rule = _loan(demo, cron="0 22 * * *", timezone="UTC", gpus=32)
    # The giver shrank since the rule was written: Quota 1.2 moved 64 GPUs to Quota 1.1.
    quota_rebalance(
        actor=None,
        source=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        node_pool=demo.node_pool,
        gpu=64_000,
    )
    before = dump()
    assert not _fire_at(rule, "2026-10-21T22:00")
    assert dump() == before
    rule.refresh_from_db()
    assert rule.last_outcome == CalendarOutcome.FAILED
    assert "Quota 1.2 guarantees 16 GPUs on A100-80G; it cannot give 32 GPUs." in (
        rule.last_run_result
    )


def test_the_notice_clears_once_a_later_firing_succeeds(
    demo: Demo, admin: Any, login: Callable[..., Any]
) -> None:
    rule = _loan(demo, cron="0 22 * * *", timezone="UTC", gpus=96)  # more than 80
    assert not _fire_at(rule, "2026-10-21T22:00")
    assert 'data-testid="calendar-failure"' in login(admin).get("/quotas/").content.decode()
    CalendarRule.objects.filter(pk=rule.pk).update(gpus=8)
    assert _fire_at(rule, "2026-10-22T22:00")
    assert 'data-testid="calendar-failure"' not in login(admin).get("/quotas/").content.decode()


def test_a_firing_writes_audit_records_naming_the_rule(demo: Demo) -> None:
    rule = _loan(demo, cron="0 22 * * *", timezone="UTC", gpus=32, name="nightly-loan")
    assert _fire_at(rule, "2026-10-21T22:00")
    records = QuotaAudit.objects.filter(action="rebalance").order_by("quota_name")
    assert [(r.quota_name, r.actor, r.via) for r in records] == [
        ("Quota 1.1", None, "calendar rule nightly-loan"),
        ("Quota 1.2", None, "calendar rule nightly-loan"),
    ]
    after = records[0].after
    assert after["Quota 1.1"]["resources"]["A100-80G"]["min"]["gpu"] == 80_000
    assert after["Quota 1.2"]["resources"]["A100-80G"]["min"]["gpu"] == 48_000


def test_lend_idle_rule_sets_the_flag_once_and_audits_it(demo: Demo) -> None:
    rule = calendar_rule_create(
        name="weekend-lend",
        cron="0 0 * * 6",
        timezone="UTC",
        action="lend_idle",
        quota=demo.quotas["Quota 1"],
        lend_idle=False,
        now=_at("2026-10-20T00:00"),
    )
    assert _fire_at(rule, "2026-10-24T00:00")  # a Saturday
    assert Quota.objects.get(name="Quota 1").lend_idle is False
    audit = QuotaAudit.objects.get(action="update", via="calendar rule weekend-lend")
    assert (audit.before["lend_idle"], audit.after["lend_idle"]) == (True, False)
    assert not _fire_at(rule, "2026-10-31T00:00")  # already off: nothing to change
    rule.refresh_from_db()
    assert rule.last_outcome == CalendarOutcome.UNCHANGED
    assert QuotaAudit.objects.filter(via="calendar rule weekend-lend").count() == 1


def test_jobs_that_lose_their_in_quota_label_get_events(
    demo: Demo,
    bob: Any,
    clock: Any,
    submit: Callable[..., Workload],
    tick: Callable[..., None],
) -> None:
    # Bob runs 48 GPUs In Quota in Quota 1.1: "first" then "second", 24 GPUs each.
    ten_hours = 10 * 3600 * 24  # GPU-seconds: they outlive the test
    first = submit(bob, "first", replicas=3, total_work=ten_hours)
    tick(1)
    second = submit(bob, "second", replicas=3, total_work=ten_hours)
    tick(30)
    assert Workload.objects.filter(in_quota=True, name__in=["first", "second"]).count() == 2
    # A rule lends 24 of Quota 1.1's GPUs to Quota 1.2 at 07:00.
    rule = calendar_rule_create(
        name="lend-to-c",
        cron="0 7 * * *",
        timezone="UTC",
        action="rebalance",
        quota=demo.quotas["Quota 1.1"],
        target=demo.quotas["Quota 1.2"],
        gpus=24,
        now=clock.now(),
    )
    clock.advance(3600)
    assert calendar_rules_fire_due(now=clock.now()) == 1
    tick(5)  # the next cycle relabels, as after a manual rebalance
    second.refresh_from_db()
    first.refresh_from_db()
    assert (first.in_quota, second.in_quota) == (True, False)
    event = WorkloadEvent.objects.filter(workload=second, kind=EventKind.ADMITTED).last()
    assert event is not None and event.message == "Now Not in Quota (preemptible)."
    assert QuotaAudit.objects.filter(via=f"calendar rule {rule.name}").count() == 2
