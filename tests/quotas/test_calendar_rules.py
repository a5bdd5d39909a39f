"""Quota calendar rules and their django-celery-beat tasks stay in step; bad input is refused
with an error naming the field, and nothing is written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from console.demo import Demo
from console.errors import DomainError
from quotas.models import CalendarRule
from quotas.services.calendar import (
    FIRE_TASK,
    calendar_rule_create,
    calendar_rule_delete,
    calendar_rule_fire,
    calendar_rule_update,
)
from quotas.services.quotas import quota_delete

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 10, 20, 12, 0, tzinfo=UTC)


def _values(demo: Demo, **changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "name": "nightly-loan",
        "cron": "0 22 * * 1-5",
        "timezone": "Europe/Berlin",
        "action": "rebalance",
        "quota": demo.quotas["Quota 1.2"],
        "target": demo.quotas["Quota 1.1"],
        "gpus": 32,
        "exclude_dates": ["2026-12-25"],
    }
    values.update(changes)
    return values


def _task(rule: CalendarRule) -> PeriodicTask:
    rule.refresh_from_db()
    assert rule.periodic_task_id is not None
    return PeriodicTask.objects.select_related("crontab").get(pk=rule.periodic_task_id)


def test_creating_a_rule_creates_its_crontab_task(demo: Demo) -> None:
    rule = calendar_rule_create(now=NOW, **_values(demo))
    task = _task(rule)
    assert task.task == FIRE_TASK
    assert json.loads(task.kwargs) == {"rule_id": rule.pk}
    assert task.enabled and task.expire_seconds == 60
    cron = task.crontab
    assert (cron.minute, cron.hour, cron.day_of_week, str(cron.timezone)) == (
        "0",
        "22",
        "1-5",
        "Europe/Berlin",
    )
    assert "Move 32 GPUs of guarantee on A100-80G from Quota 1.2 to Quota 1.1" in (task.description)
    assert "except 2026-12-25" in task.description


def test_editing_disabling_and_deleting_keep_the_task_in_step(demo: Demo) -> None:
    rule = calendar_rule_create(now=NOW, **_values(demo))
    old_schedule = _task(rule).crontab_id
    calendar_rule_update(rule=rule, now=NOW, cron="30 21 * * *", timezone="Asia/Shanghai")
    task = _task(rule)
    assert (task.crontab.minute, task.crontab.hour, task.crontab.day_of_week) == ("30", "21", "*")
    assert str(task.crontab.timezone) == "Asia/Shanghai"
    assert not CrontabSchedule.objects.filter(pk=old_schedule).exists()  # no task uses it
    calendar_rule_update(rule=rule, now=NOW, enabled=False)
    assert _task(rule).enabled is False
    calendar_rule_update(rule=rule, now=NOW, enabled=True)
    assert _task(rule).enabled is True
    task_id, schedule_id = _task(rule).pk, _task(rule).crontab_id
    calendar_rule_delete(rule=rule)
    assert not CalendarRule.objects.exists()
    assert not PeriodicTask.objects.filter(pk=task_id).exists()
    assert not CrontabSchedule.objects.filter(pk=schedule_id).exists()


def test_a_disabled_rule_does_not_fire_and_re_enabling_does_not_fire_the_past(
    demo: Demo,
) -> None:
    rule = calendar_rule_create(now=NOW, **_values(demo, cron="0 22 * * *", timezone="UTC"))
    calendar_rule_update(rule=rule, now=NOW, enabled=False)
    assert not calendar_rule_fire(rule=rule, now=datetime(2026, 10, 21, 22, 0, tzinfo=UTC))
    calendar_rule_update(rule=rule, now=datetime(2026, 10, 21, 23, 0, tzinfo=UTC), enabled=True)
    # The 22:00 it missed while disabled stays missed; the next one fires.
    assert not calendar_rule_fire(rule=rule, now=datetime(2026, 10, 21, 23, 0, tzinfo=UTC))
    assert calendar_rule_fire(rule=rule, now=datetime(2026, 10, 22, 22, 0, tzinfo=UTC))


def test_a_quota_named_by_a_rule_cannot_be_deleted_until_the_rule_goes(
    demo: Demo, admin: Any
) -> None:
    from workspaces.models import Workspace

    calendar_rule_create(now=NOW, **_values(demo))
    quota = demo.quotas["Quota 1.1"]
    Workspace.objects.get(name="workspace_b").quotas.remove(quota)
    with pytest.raises(DomainError) as refused:
        quota_delete(actor=admin, quota=quota)
    assert "named by calendar rules (nightly-loan)" in refused.value.message


BAD = [
    ({"name": "  "}, "name", "Give the rule a name."),
    ({"cron": "0 25 * * *"}, "cron", "hour 25 is out of range 0-23."),
    ({"cron": "0 22 * *"}, "cron", "has 4"),
    ({"timezone": "Mars/Olympus"}, "timezone", "Unknown time zone 'Mars/Olympus'"),
    ({"exclude_dates": ["2026-13-01"]}, "exclude_dates", "Exclude-date '2026-13-01' is not"),
    ({"exclude_dates": "christmas"}, "exclude_dates", "YYYY-MM-DD"),
    ({"action": "borrow"}, "action", "Action 'borrow' is not one of"),
    ({"gpus": 0}, "gpus", "GPUs must be at least 1, not 0."),
    ({"gpus": "lots"}, "gpus", "whole number"),
    ({"target": None}, "target", "Choose the sibling quota"),
    ({"target": "Quota 1"}, "target", "Quota 1 is not a sibling of Quota 1.2"),
    ({"target": "Quota 1.2"}, "target", "two different quotas"),
    ({"action": "lend_idle", "lend_idle": None}, "lend_idle", "on or off"),
    ({"quota": None}, "quota", "Choose the quota"),
]


@pytest.mark.parametrize(("change", "field", "words"), BAD, ids=[b[1] + "-" + b[2] for b in BAD])
def test_bad_input_names_the_field_and_writes_nothing(
    demo: Demo, change: dict[str, Any], field: str, words: str
) -> None:
    if isinstance(change.get("target"), str):
        change = {**change, "target": demo.quotas[change["target"]]}
    with pytest.raises(DomainError) as refused:
        calendar_rule_create(now=NOW, **_values(demo, **change))
    assert refused.value.field == field
    assert words in refused.value.message
    assert not CalendarRule.objects.exists() and not PeriodicTask.objects.exists()


def test_a_second_rule_with_the_same_name_is_refused_on_the_name(demo: Demo) -> None:
    calendar_rule_create(now=NOW, **_values(demo))
    with pytest.raises(DomainError) as refused:
        calendar_rule_create(now=NOW, **_values(demo, gpus=8))
    assert refused.value.field == "name"
    assert CalendarRule.objects.count() == 1


def test_a_refused_edit_leaves_the_rule_and_its_task_as_they_were(demo: Demo) -> None:
    rule = calendar_rule_create(now=NOW, **_values(demo))
    task_before = PeriodicTask.objects.values().get(pk=_task(rule).pk)
    with pytest.raises(DomainError) as refused:
        calendar_rule_update(rule=rule, now=NOW, cron="every night")
    assert refused.value.field == "cron"
    rule.refresh_from_db()
    assert rule.cron == "0 22 * * 1-5"
    assert PeriodicTask.objects.values().get(pk=rule.periodic_task_id) == task_before


def test_the_demo_lends_team_b_32_gpus_of_team_cs_guarantee_each_weekday_night(
    demo: Demo,
) -> None:
    from console.demo import seed_demo_calendar
    from quotas.services.calendar import calendar_rules_fire_due
    from tests.quotas.builders import min_gpus

    monday = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    rules = seed_demo_calendar(now=monday)
    assert seed_demo_calendar(now=monday) == rules  # seeding again adds nothing
    assert PeriodicTask.objects.filter(task=FIRE_TASK).count() == 2
    night = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
    assert calendar_rules_fire_due(now=night) == 1
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (80, 48)
    assert calendar_rules_fire_due(now=datetime(2026, 12, 1, 8, 0, tzinfo=UTC)) == 1
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (48, 80)
    # A runner down from Tuesday to Saturday night catches up the latest due firing of each
    # rule, oldest first: Friday's loan, then Saturday's return. Sunday returns nothing.
    assert calendar_rules_fire_due(now=datetime(2026, 12, 5, 22, 0, tzinfo=UTC)) == 2
    assert calendar_rules_fire_due(now=datetime(2026, 12, 6, 8, 0, tzinfo=UTC)) == 0
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (48, 80)


def test_the_demo_seeded_in_the_night_returns_nothing_it_did_not_lend(demo: Demo) -> None:
    from console.demo import seed_demo_calendar
    from quotas.services.calendar import calendar_rules_fire_due
    from tests.quotas.builders import min_gpus

    seed_demo_calendar(now=datetime(2026, 12, 3, 7, 30, tzinfo=UTC))  # Thursday, before 08:00
    assert calendar_rules_fire_due(now=datetime(2026, 12, 3, 8, 0, tzinfo=UTC)) == 0
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (48, 80)
    assert calendar_rules_fire_due(now=datetime(2026, 12, 3, 22, 0, tzinfo=UTC)) == 1
    assert calendar_rules_fire_due(now=datetime(2026, 12, 4, 8, 0, tzinfo=UTC)) == 1
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (48, 80)


def test_the_admin_shows_a_calendar_rules_task_read_only_and_leaves_it_alone(
    demo: Demo, admin: Any, login: Any
) -> None:
    from django.urls import reverse

    rule = calendar_rule_create(now=NOW, **_values(demo))
    task = _task(rule)
    client = login(admin)
    body = client.get(
        reverse("admin:django_celery_beat_periodictask_change", args=[task.pk])
    ).content.decode()
    assert f'href="/quotas/calendar/{rule.pk}/"' in body and "weekdays at 22:00" in body
    assert 'name="_save"' not in body  # read-only: the rule is the source of truth
    response = client.post(
        reverse("admin:django_celery_beat_periodictask_changelist"),
        {"action": "disable_tasks", "_selected_action": [task.pk]},
        follow=True,
    )
    assert "Left 1 rule task alone" in response.content.decode()
    assert _task(rule).enabled
