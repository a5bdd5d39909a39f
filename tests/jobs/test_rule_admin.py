"""Scaling rules have one source of truth: the rule. The Django admin shows its beat task
read-only with a link back; the service page shows the schedule in words and the last run."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from jobs import tasks
from jobs.models import ScalingRule, Workload
from jobs.services.scaling import (
    FIRE_TASK,
    scaling_rule_create,
    scaling_rule_update,
    scaling_rules_fire_due,
)

pytestmark = pytest.mark.django_db

WS = "workspace_a"


@pytest.fixture
def rule(service: Workload, clock: Any) -> ScalingRule:
    """chat-api to 3 replicas every day at 08:00 in Shanghai (00:00 UTC)."""
    return scaling_rule_create(
        service=service,
        name="day",
        cron="0 8 * * *",
        timezone="Asia/Shanghai",
        target_replicas=3,
        now=clock.now(),
    )


@pytest.fixture
def other_task(db: None) -> PeriodicTask:
    """A periodic task of someone else's, which the admin edits as before."""
    every = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.SECONDS)
    return PeriodicTask.objects.create(name="cleanup", task="other.cleanup", interval=every)


def _admin_url(view: str, *args: Any, model: str = "periodictask") -> str:
    return reverse(f"admin:django_celery_beat_{model}_{view}", args=args)


def _service_page(client: Any, rule: ScalingRule) -> str:
    url = reverse("jobs:service_detail", args=[WS, rule.service_id])
    body: str = client.get(url).content.decode()
    return body.split(f'data-rule="{rule.name}"')[1].split("</tr>")[0]


def _change_form(task: PeriodicTask, **changes: Any) -> dict[str, Any]:
    """What the admin's change form posts for this task (an unticked box is left out)."""
    data = {
        "name": task.name,
        "regtask": task.task,
        "task": task.task,
        "description": task.description,
        "crontab": task.crontab_id or "",
        "interval": task.interval_id or "",
        "args": task.args,
        "kwargs": task.kwargs,
        "expire_seconds": task.expire_seconds or "",
        "headers": task.headers,
        "priority": "",
        "enabled": "on",
        **changes,
    }
    return {k: v for k, v in data.items() if v is not None}


# The admin round trip ---------------------------------------------------------------------------


def test_disabling_a_rules_task_in_the_admin_is_refused_and_the_rule_stays_on(
    rule, admin, alice, login
) -> None:
    task = rule.periodic_task
    client = login(admin)
    form = _change_form(task)
    del form["enabled"]  # the admin's Enabled box, unticked
    assert client.post(_admin_url("change", task.pk), form).status_code == 403
    task.refresh_from_db()
    rule.refresh_from_db()
    assert task.enabled and rule.enabled
    assert 'data-field="enabled">Yes<' in _service_page(login(alice), rule)


def test_the_admin_shows_a_rules_task_read_only_with_a_link_to_the_rule(rule, admin, login) -> None:
    body = login(admin).get(_admin_url("change", rule.periodic_task.pk)).content.decode()
    link = reverse("jobs:rule_update", args=[WS, rule.service_id, rule.pk])
    assert f'href="{link}"' in body
    assert "every day at 08:00" in body and "Asia/Shanghai" in body
    assert 'name="_save"' not in body  # no Save button: read-only
    listing = login(admin).get(_admin_url("changelist")).content.decode()
    assert f'href="{link}"' in listing


def test_the_admins_bulk_actions_leave_rules_tasks_alone(rule, other_task, admin, login) -> None:
    task = rule.periodic_task
    response = login(admin).post(
        _admin_url("changelist"),
        {"action": "disable_tasks", "_selected_action": [task.pk, other_task.pk]},
        follow=True,
    )
    assert "Left 1 rule task alone" in response.content.decode()
    task.refresh_from_db()
    other_task.refresh_from_db()
    assert task.enabled and not other_task.enabled


def test_the_admin_may_not_delete_a_rules_task(rule, admin, login) -> None:
    task = rule.periodic_task
    url = _admin_url("delete", task.pk)
    assert login(admin).post(url, {"post": "yes"}).status_code == 403
    assert PeriodicTask.objects.filter(pk=task.pk).exists()


def test_the_crontab_a_rules_task_uses_is_read_only(rule, admin, login) -> None:
    crontab = rule.periodic_task.crontab
    url = _admin_url("change", crontab.pk, model="crontabschedule")
    data = {"minute": "30", "hour": "9", "day_of_month": "*", "month_of_year": "*"}
    response = login(admin).post(url, {**data, "day_of_week": "*", "timezone": "UTC"})
    assert response.status_code == 403
    crontab.refresh_from_db()
    assert (crontab.minute, crontab.hour) == ("0", "8")


def test_the_admin_still_edits_other_periodic_tasks(other_task, admin, login) -> None:
    form = _change_form(other_task)
    del form["enabled"]
    response = login(admin).post(_admin_url("change", other_task.pk), form)
    assert response.status_code == 302
    other_task.refresh_from_db()
    assert not other_task.enabled


def test_the_admin_refuses_a_hand_made_rule_task(rule, admin, login) -> None:
    every = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.SECONDS)
    form = {
        "name": "sneaky",
        "regtask": FIRE_TASK,
        "task": FIRE_TASK,
        "interval": every.pk,
        "args": "[]",
        "kwargs": json.dumps({"rule_id": rule.pk}),
        "headers": "{}",
        "enabled": "on",
    }
    response = login(admin).post(_admin_url("add"), form)
    assert response.status_code == 200
    assert "Rule tasks are made by the console" in response.content.decode()
    assert not PeriodicTask.objects.filter(name="sneaky").exists()


def test_a_console_edit_shows_in_the_admin_at_once(rule, alice, admin, login) -> None:
    url = reverse("jobs:rule_update", args=[WS, rule.service_id, rule.pk])
    data = {"name": "day", "cron": "0 22 * * 1-5", "timezone": "UTC", "target_replicas": "1"}
    assert login(alice).post(url, data).status_code == 302  # Enabled left unticked
    task = PeriodicTask.objects.select_related("crontab").get(pk=rule.periodic_task_id)
    assert not task.enabled
    assert (task.crontab.minute, task.crontab.hour, task.crontab.day_of_week) == ("0", "22", "1-5")
    body = login(admin).get(_admin_url("change", task.pk)).content.decode()
    assert "weekdays at 22:00" in body and "disabled" in body


# The service page: words, last run, time zones ---------------------------------------------------


def test_service_page_shows_the_schedule_in_words_and_as_written(rule, alice, login) -> None:
    cell = _service_page(login(alice), rule)
    assert "every day at 08:00" in cell and "<code>0 8 * * *</code>" in cell


def test_last_run_is_shown_after_the_embedded_runner_fires(rule, alice, login, clock) -> None:
    assert "not yet" in _service_page(login(alice), rule)
    clock.advance(timedelta(hours=18).total_seconds())  # 06:00 UTC → 00:00 UTC, 08:00 Shanghai
    assert scaling_rules_fire_due(now=clock.now()) == 1
    cell = _service_page(login(alice), rule).split('data-field="last-run">')[1]
    assert cell.startswith("Wed 2026-12-02 08:00 CST")
    assert "Scaled from 1 to 3 replicas." in cell


def test_last_run_is_shown_after_beats_task_fires(rule, alice, login, clock) -> None:
    clock.advance(timedelta(hours=18).total_seconds())
    tasks.scaling_rule_fire(rule_id=rule.pk)  # what beat's crontab entry queues
    rule.refresh_from_db()
    assert rule.last_run_result == "Scaled from 1 to 3 replicas."
    clock.advance(timedelta(days=1).total_seconds())
    tasks.scaling_rule_fire(rule_id=rule.pk)
    cell = _service_page(login(alice), rule).split('data-field="last-run">')[1]
    assert cell.startswith("Thu 2026-12-03 08:00 CST")
    assert "No change: already at 3 replicas." in cell


def test_an_excluded_firing_is_a_run_that_skipped(service, clock) -> None:
    rule = scaling_rule_create(
        service=service,
        name="daily",
        cron="0 0 * * *",
        timezone="UTC",
        target_replicas=2,
        exclude_cron="0 0 * * 3",  # Wednesdays
        now=clock.now(),
    )
    clock.advance(timedelta(hours=18).total_seconds())  # Wednesday 2 December, 00:00 UTC
    scaling_rules_fire_due(now=clock.now())
    rule.refresh_from_db()
    assert rule.last_run_result == "Skipped: the exception 0 0 * * 3 matches."


def test_a_new_schedule_is_not_a_run(rule, clock) -> None:
    clock.advance(timedelta(hours=1).total_seconds())
    updated = scaling_rule_update(rule=rule, cron="30 6 * * *", timezone="UTC", now=clock.now())
    assert updated.last_fired_at is not None  # 06:30 UTC today counts as handled...
    assert updated.last_run_at is None  # ...but it never ran


def test_rule_form_offers_time_zones_from_a_list(rule, alice, login) -> None:
    url = reverse("jobs:rule_update", args=[WS, rule.service_id, rule.pk])
    body = login(alice).get(url).content.decode()
    assert '<select name="timezone"' in body
    assert '<option value="Asia/Shanghai" selected>' in body
    assert '<option value="America/New_York">America/New York</option>' in body
    page = login(alice).get(reverse("jobs:service_detail", args=[WS, rule.service_id]))
    assert '<option value="UTC" selected>' in page.content.decode()


def test_rule_form_refuses_a_zone_not_in_the_list_in_plain_words(rule, alice, login) -> None:
    url = reverse("jobs:rule_create", args=[WS, rule.service_id])
    data = {"name": "night", "cron": "0 22 * * *", "timezone": "Mars/Olympus", "target_replicas": 1}
    response = login(alice).post(url, data)
    assert response.status_code == 400
    assert response.context["rule_form"].errors["timezone"] == [
        "Choose a time zone from the list, such as UTC or Asia/Shanghai."
    ]
    assert not ScalingRule.objects.filter(name="night").exists()


def test_rule_edit_page_says_what_the_rule_does_now(rule, alice, login, clock) -> None:
    clock.advance(timedelta(hours=18).total_seconds())
    scaling_rules_fire_due(now=clock.now())
    url = reverse("jobs:rule_update", args=[WS, rule.service_id, rule.pk])
    body = login(alice).get(url).content.decode()
    assert "Now: every day at 08:00 (Asia/Shanghai), to 3 replicas." in body
    assert "Last run Wed 2026-12-02 08:00 CST: Scaled from 1 to 3 replicas.</p>" in body


def test_the_api_reports_the_last_run_too(rule, alice, clock) -> None:
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    clock.advance(timedelta(hours=18).total_seconds())
    scaling_rules_fire_due(now=clock.now())
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    found = client.get(f"/api/v1/services/{rule.service_id}/rules/").json()
    found = found.get("results", found)
    assert found[0]["last_run_at"] == "2026-12-02T00:00:00Z"
    assert found[0]["last_run_result"] == "Scaled from 1 to 3 replicas."
