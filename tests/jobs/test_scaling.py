"""Scheduled and manual scaling of inference services, and the beat tasks that mirror rules."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from console.clock import ManualClock
from console.demo import Demo
from console.errors import DomainError
from console.schedules import EXPIRE_SECONDS
from jobs.choices import EventKind, Status
from jobs.models import ScalingRule, Workload, WorkloadEvent
from jobs.services.scaling import (
    FIRE_TASK,
    next_firing,
    scaling_rule_create,
    scaling_rule_delete,
    scaling_rule_fire,
    scaling_rule_update,
    scaling_rules_fire_due,
    service_scale,
)
from jobs.services.workloads import workload_cancel

# 2025-06-01 is a Sunday; 20:00 UTC is 04:00 on Monday June 2 in Shanghai.
START = datetime(2025, 6, 1, 20, tzinfo=UTC)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def service(demo: Demo, alice: Any) -> Workload:
    workload = Workload.objects.create(
        name="chat",
        kind="inference",
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        owner=alice,
        gpu=8000,
        replicas=1,
        min_replicas=1,
        max_replicas=8,
        status=Status.RUNNING,
        submitted_at=START - timedelta(days=1),
        started_at=START - timedelta(days=1),
    )
    workload.node_pools.set([demo.node_pool])
    return workload


def day_and_night(service: Workload, **extra: Any) -> tuple[ScalingRule, ScalingRule]:
    day = scaling_rule_create(
        service=service,
        name="day",
        cron="0 8 * * *",
        timezone="Asia/Shanghai",
        target_replicas=8,
        now=START,
        **extra,
    )
    night = scaling_rule_create(
        service=service,
        name="night",
        cron="0 22 * * *",
        timezone="Asia/Shanghai",
        target_replicas=1,
        now=START,
        **extra,
    )
    return day, night


def replicas(service: Workload) -> int:
    return Workload.objects.get(pk=service.pk).replicas


def scaled_messages(service: Workload) -> list[str]:
    return list(
        WorkloadEvent.objects.filter(workload=service, kind=EventKind.SCALED).values_list(
            "message", flat=True
        )
    )


# Firing --------------------------------------------------------------------------------------


def test_day_and_night_rules_fire_at_shanghai_times_in_utc(service: Workload) -> None:
    day_and_night(service)
    clock = ManualClock(utc(2025, 6, 1, 23, 59, 59))
    assert scaling_rules_fire_due(now=clock.now()) == 0
    assert replicas(service) == 1

    clock.set(utc(2025, 6, 2, 0, 0))  # 08:00 in Shanghai
    assert scaling_rules_fire_due(now=clock.now()) == 1
    assert replicas(service) == 8

    clock.set(utc(2025, 6, 2, 13, 59))
    assert scaling_rules_fire_due(now=clock.now()) == 0
    assert replicas(service) == 8

    clock.set(utc(2025, 6, 2, 14, 0))  # 22:00 in Shanghai
    assert scaling_rules_fire_due(now=clock.now()) == 1
    assert replicas(service) == 1
    assert scaled_messages(service) == [
        "Scaled from 1 to 8 replicas by rule day (0 8 * * * Asia/Shanghai)",
        "Scaled from 8 to 1 replica by rule night (0 22 * * * Asia/Shanghai)",
    ]
    event = WorkloadEvent.objects.filter(workload=service).first()
    assert event is not None
    assert event.at == utc(2025, 6, 2, 0, 0)
    assert event.data["before"] == 1
    assert event.data["after"] == 8


def test_firing_twice_for_the_same_instant_scales_once(service: Workload) -> None:
    day, _ = day_and_night(service)
    at = utc(2025, 6, 2, 0, 0, 30)
    assert scaling_rule_fire(rule=day, now=at) is True
    assert scaling_rule_fire(rule=day, now=at) is False
    assert scaling_rule_fire(rule=day, now=at + timedelta(hours=3)) is False
    assert scaling_rules_fire_due(now=at + timedelta(hours=3)) == 0
    assert replicas(service) == 8
    assert len(scaled_messages(service)) == 1
    day.refresh_from_db()
    assert day.last_fired_at == utc(2025, 6, 2, 0, 0)


def test_a_rule_does_not_fire_for_times_before_it_existed(service: Workload) -> None:
    rule = scaling_rule_create(
        service=service,
        name="day",
        cron="0 8 * * *",
        timezone="Asia/Shanghai",
        target_replicas=8,
        now=utc(2025, 6, 2, 1, 0),  # 09:00 in Shanghai, an hour after today's firing
    )
    assert scaling_rule_fire(rule=rule, now=utc(2025, 6, 2, 1, 0, 10)) is False
    assert replicas(service) == 1
    assert scaling_rule_fire(rule=rule, now=utc(2025, 6, 3, 0, 0)) is True


def test_a_late_tick_catches_up_and_the_latest_rule_wins(service: Workload) -> None:
    day_and_night(service)
    # The runner was down from before 08:00 until after 22:00 Shanghai time: both fire in
    # firing order within one tick, before any cycle, so the service ends at night's target.
    assert scaling_rules_fire_due(now=utc(2025, 6, 2, 15, 0)) == 2
    assert replicas(service) == 1
    assert scaled_messages(service) == [
        "Scaled from 1 to 8 replicas by rule day (0 8 * * * Asia/Shanghai)",
        "Scaled from 8 to 1 replica by rule night (0 22 * * * Asia/Shanghai)",
    ]
    assert all(r.last_fired_at is not None for r in ScalingRule.objects.all())


def test_exclude_dates_skip_weekends_but_mark_them_handled(service: Workload) -> None:
    day, night = day_and_night(service, exclude_cron="* * * * 6,0")
    saturday_eight = utc(2025, 6, 7, 0, 0)  # Saturday 08:00 in Shanghai
    assert scaling_rule_fire(rule=day, now=saturday_eight) is False
    assert replicas(service) == 1
    day.refresh_from_db()
    assert day.last_fired_at == saturday_eight
    assert scaling_rules_fire_due(now=utc(2025, 6, 8, 0, 0)) == 0  # Sunday
    assert replicas(service) == 1
    assert scaling_rules_fire_due(now=utc(2025, 6, 9, 0, 0)) == 1  # Monday
    assert replicas(service) == 8


def test_next_firing_skips_excluded_dates_and_shows_the_rule_time_zone(
    service: Workload,
) -> None:
    day, _ = day_and_night(service, exclude_cron="* * * * sat,sun")
    friday_nine = utc(2025, 6, 6, 1, 0)  # Friday 09:00 in Shanghai
    upcoming = next_firing(day, friday_nine)
    assert upcoming == utc(2025, 6, 9, 0, 0)
    assert upcoming is not None
    assert str(upcoming.tzinfo) == "Asia/Shanghai"
    assert (upcoming.weekday(), upcoming.hour) == (0, 8)
    scaling_rule_update(rule=day, enabled=False, now=friday_nine)
    day.refresh_from_db()
    assert next_firing(day, friday_nine) is None


def test_a_disabled_rule_does_not_fire(service: Workload) -> None:
    day, _ = day_and_night(service, enabled=False)
    assert scaling_rules_fire_due(now=utc(2025, 6, 2, 0, 0)) == 0
    assert scaling_rule_fire(rule=day, now=utc(2025, 6, 2, 0, 0)) is False
    assert replicas(service) == 1


def test_re_enabling_or_rescheduling_does_not_fire_retroactively(service: Workload) -> None:
    day, _ = day_and_night(service, enabled=False)
    scaling_rule_update(rule=day, enabled=True, now=utc(2025, 6, 2, 3, 0))
    assert scaling_rules_fire_due(now=utc(2025, 6, 2, 3, 1)) == 0
    scaling_rule_update(rule=day, cron="0 10 * * *", now=utc(2025, 6, 2, 3, 0))
    assert scaling_rules_fire_due(now=utc(2025, 6, 2, 3, 1)) == 0  # 10:00 was an hour ago
    assert replicas(service) == 1
    assert scaling_rules_fire_due(now=utc(2025, 6, 3, 2, 0)) == 1  # tomorrow 10:00


def test_a_rule_for_an_ended_service_is_handled_without_scaling(service: Workload) -> None:
    day, _ = day_and_night(service)
    Workload.objects.filter(pk=service.pk).update(status=Status.STOPPED)
    assert scaling_rule_fire(rule=day, now=utc(2025, 6, 2, 0, 0)) is False
    day.refresh_from_db()
    assert day.last_fired_at == utc(2025, 6, 2, 0, 0)


def test_a_target_outside_a_narrowed_range_is_noted_not_applied(service: Workload) -> None:
    day, _ = day_and_night(service)
    Workload.objects.filter(pk=service.pk).update(max_replicas=4)
    assert scaling_rule_fire(rule=day, now=utc(2025, 6, 2, 0, 0)) is False
    assert replicas(service) == 1
    assert scaled_messages(service) == [
        "Rule day did not scale: chat runs 1-4 replicas; 8 is out of that range."
    ]


def test_due_rules_are_found_with_one_query(
    service: Workload, django_assert_num_queries: Any
) -> None:
    for hour in range(10):
        scaling_rule_create(
            service=service,
            name=f"rule-{hour}",
            cron=f"0 {hour} * * *",
            timezone="Europe/Berlin",
            target_replicas=2,
            now=START,
        )
    with django_assert_num_queries(1):
        assert scaling_rules_fire_due(now=START + timedelta(minutes=1)) == 0


# Manual scaling ------------------------------------------------------------------------------


def test_service_scale_sets_the_target_records_and_wakes_the_scheduler(
    service: Workload, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        scaled = service_scale(service=service, replicas=4, now=START, actor=alice)
    assert scaled.replicas == 4
    assert replicas(service) == 4
    assert scaled_messages(service) == ["Scaled from 1 to 4 replicas by alice"]
    # One push for the event, one cycle request.
    assert len(callbacks) == 2


@pytest.mark.parametrize("target", [0, 9, 100])
def test_service_scale_refuses_outside_min_and_max(service: Workload, target: int) -> None:
    with pytest.raises(DomainError) as error:
        service_scale(service=service, replicas=target, now=START)
    assert error.value.field == "replicas"
    assert "1-8" in error.value.message
    assert replicas(service) == 1
    assert not WorkloadEvent.objects.exists()


def test_service_scale_to_the_same_count_changes_nothing(service: Workload) -> None:
    service_scale(service=service, replicas=1, now=START)
    assert not WorkloadEvent.objects.exists()


def test_only_inference_services_scale(service: Workload) -> None:
    Workload.objects.filter(pk=service.pk).update(kind="training")
    service.refresh_from_db()
    with pytest.raises(DomainError) as error:
        service_scale(service=service, replicas=2, now=START)
    assert error.value.field == "service"
    with pytest.raises(DomainError):
        scaling_rule_create(
            service=service,
            name="day",
            cron="0 8 * * *",
            timezone="UTC",
            target_replicas=2,
            now=START,
        )


# Validation ----------------------------------------------------------------------------------

BAD_RULES = [
    ({"cron": "61 8 * * *"}, "cron", "minute 61 is out of range 0-59"),
    ({"cron": "0 8 * *"}, "cron", "has 4"),
    ({"exclude_cron": "* * * * 9"}, "exclude_cron", "day of week 9 is out of range 0-7"),
    ({"timezone": "Mars/Olympus"}, "timezone", "Unknown time zone 'Mars/Olympus'"),
    ({"timezone": ""}, "timezone", "Choose a time zone"),
    ({"target_replicas": 9}, "target_replicas", "1-8"),
    ({"target_replicas": 0}, "target_replicas", "1-8"),
    ({"name": "  "}, "name", "Give the rule a name"),
]


@pytest.mark.parametrize(
    ("change", "field", "message"), BAD_RULES, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_RULES)]
)
def test_create_refuses_bad_input_and_writes_nothing(
    service: Workload, change: dict[str, Any], field: str, message: str
) -> None:
    values: dict[str, Any] = {
        "name": "day",
        "cron": "0 8 * * *",
        "timezone": "Asia/Shanghai",
        "target_replicas": 8,
        **change,
    }
    with pytest.raises(DomainError) as error:
        scaling_rule_create(service=service, now=START, **values)
    assert error.value.field == field
    assert message in error.value.message
    assert not ScalingRule.objects.exists()
    assert not PeriodicTask.objects.exists()
    assert not CrontabSchedule.objects.exists()


@pytest.mark.parametrize(
    ("change", "field", "message"), BAD_RULES, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_RULES)]
)
def test_update_refuses_bad_input_and_changes_nothing(
    service: Workload, change: dict[str, Any], field: str, message: str
) -> None:
    day, _ = day_and_night(service)
    with pytest.raises(DomainError) as error:
        scaling_rule_update(rule=day, now=START, **change)
    assert error.value.field == field
    assert message in error.value.message
    stored = ScalingRule.objects.get(pk=day.pk)
    assert (stored.name, stored.cron, stored.timezone, stored.target_replicas) == (
        "day",
        "0 8 * * *",
        "Asia/Shanghai",
        8,
    )
    task = PeriodicTask.objects.get(pk=day.periodic_task_id)
    assert task.crontab.hour == "8"


def test_rule_names_are_unique_per_service(service: Workload) -> None:
    day, night = day_and_night(service)
    with pytest.raises(DomainError) as error:
        scaling_rule_update(rule=night, name="day")
    assert error.value.field == "name"
    assert "already has a rule named 'day'" in error.value.message


def test_update_refuses_unknown_fields(service: Workload) -> None:
    day, _ = day_and_night(service)
    with pytest.raises(DomainError) as error:
        scaling_rule_update(rule=day, service=None)
    assert error.value.field == "service"


# Beat tasks ----------------------------------------------------------------------------------


def test_creating_a_rule_creates_its_periodic_task(service: Workload) -> None:
    day, _ = day_and_night(service)
    task = PeriodicTask.objects.select_related("crontab").get(pk=day.periodic_task_id)
    assert task.task == FIRE_TASK == "jobs.tasks.scaling_rule_fire"
    assert json.loads(task.kwargs) == {"rule_id": day.pk}
    assert task.enabled is True
    assert task.expire_seconds == EXPIRE_SECONDS <= 60
    assert task.expires is None
    crontab = task.crontab
    assert crontab is not None
    assert (
        crontab.minute,
        crontab.hour,
        crontab.day_of_month,
        crontab.month_of_year,
        crontab.day_of_week,
    ) == ("0", "8", "*", "*", "*")
    assert str(crontab.timezone) == "Asia/Shanghai"
    assert PeriodicTask.objects.filter(task=FIRE_TASK).count() == 2


def test_editing_a_rule_updates_its_periodic_task(service: Workload) -> None:
    day, _ = day_and_night(service)
    task_id = day.periodic_task_id
    scaling_rule_update(
        rule=day, cron="30 9 * * mon-fri", timezone="America/New_York", name="weekday", now=START
    )
    task = PeriodicTask.objects.select_related("crontab").get(pk=task_id)
    crontab = task.crontab
    assert crontab is not None
    assert (crontab.minute, crontab.hour, crontab.day_of_week) == ("30", "9", "1,2,3,4,5")
    assert str(crontab.timezone) == "America/New_York"
    assert "weekday" in task.name
    # The old schedule was only this rule's, so it went with the edit.
    assert not CrontabSchedule.objects.filter(hour="8").exists()


def test_disabling_a_rule_disables_its_periodic_task(service: Workload) -> None:
    day, _ = day_and_night(service)
    scaling_rule_update(rule=day, enabled=False)
    assert PeriodicTask.objects.get(pk=day.periodic_task_id).enabled is False
    scaling_rule_update(rule=day, enabled=True, now=START)
    assert PeriodicTask.objects.get(pk=day.periodic_task_id).enabled is True


def test_deleting_a_rule_removes_its_periodic_task(service: Workload) -> None:
    day, night = day_and_night(service)
    task_id = day.periodic_task_id
    scaling_rule_delete(rule=day)
    assert not ScalingRule.objects.filter(pk=day.pk).exists()
    assert not PeriodicTask.objects.filter(pk=task_id).exists()
    assert not CrontabSchedule.objects.filter(hour="8").exists()
    assert PeriodicTask.objects.filter(pk=night.periodic_task_id).exists()


def test_ending_a_service_disables_its_rules_and_removes_their_beat_tasks(
    service: Workload, alice: Any
) -> None:
    day, night = day_and_night(service)
    workload_cancel(actor=alice, workload=service, now=START)
    assert not PeriodicTask.objects.filter(name__startswith="Scaling rule").exists()
    assert not CrontabSchedule.objects.filter(hour__in=["8", "22"]).exists()
    rules = ScalingRule.objects.filter(service=service)
    assert [(r.name, r.enabled, r.periodic_task_id) for r in rules] == [
        (day.name, False, None),
        (night.name, False, None),
    ]


def test_rules_with_the_same_schedule_share_a_crontab(service: Workload) -> None:
    scaling_rule_create(
        service=service, name="a", cron="0 8 * * *", timezone="UTC", target_replicas=2, now=START
    )
    b = scaling_rule_create(
        service=service, name="b", cron="0 8 * * *", timezone="UTC", target_replicas=3, now=START
    )
    assert CrontabSchedule.objects.count() == 1
    scaling_rule_delete(rule=b)
    assert CrontabSchedule.objects.count() == 1


def test_firing_a_rule_deleted_meanwhile_does_nothing(service: Workload) -> None:
    day, _ = day_and_night(service)
    ScalingRule.objects.filter(pk=day.pk).delete()
    assert scaling_rule_fire(rule=day, now=utc(2025, 6, 2, 0, 0)) is False
    assert replicas(service) == 1
