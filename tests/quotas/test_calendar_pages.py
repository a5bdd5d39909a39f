"""The Calendar pages: platform admins only; the form names the bad field; a rule's page
shows what it would do if it fired now and links a what-if of the last 7 days; delete asks."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django_celery_beat.models import PeriodicTask

from console.demo import Demo
from jobs.models import Workload
from quotas.models import CalendarRule
from quotas.services.calendar import calendar_rule_create
from tests.jobs import conftest as control
from tests.quotas.builders import dump

pytestmark = pytest.mark.django_db

clock, sim, tick, submit = control.clock, control.sim, control.tick, control.submit


def _rule(demo: Demo, **changes: Any) -> CalendarRule:
    values: dict[str, Any] = {
        "name": "nightly-loan",
        "cron": "0 22 * * 1-5",
        "timezone": "Europe/Berlin",
        "action": "rebalance",
        "quota": demo.quotas["Quota 1.2"],
        "target": demo.quotas["Quota 1.1"],
        "gpus": 32,
        "exclude_dates": ["2026-12-25"],
        **changes,
    }
    return calendar_rule_create(now=datetime(2026, 11, 1, tzinfo=UTC), **values)


def _form(demo: Demo, **changes: str) -> dict[str, str]:
    return {
        "name": "nightly-loan",
        "action": "rebalance",
        "quota": str(demo.quotas["Quota 1.2"].pk),
        "target": str(demo.quotas["Quota 1.1"].pk),
        "node_pool": "",
        "gpus": "32",
        "lend_idle": "",
        "cron": "0 22 * * 1-5",
        "timezone": "Europe/Berlin",
        "exclude_dates": "2026-12-25, 2026-12-31",
        "enabled": "on",
        **changes,
    }


PAGES = [
    ("get", "/quotas/calendar/"),
    ("get", "/quotas/{q11}/calendar/"),
    ("get", "/quotas/calendar/new/"),
    ("get", "/quotas/calendar/{rule}/"),
    ("post", "/quotas/calendar/{rule}/"),
    ("post", "/quotas/calendar/{rule}/delete/"),
]


@pytest.mark.parametrize(("method", "url"), PAGES, ids=[f"{m} {u}" for m, u in PAGES])
@pytest.mark.parametrize("persona", ["admin", "alice", "bob", "carol", None])
def test_only_platform_admins_reach_the_calendar_pages(
    demo: Demo, login: Callable[..., Any], persona: str | None, method: str, url: str
) -> None:
    from django.contrib.auth import get_user_model

    rule = _rule(demo)
    user = get_user_model().objects.get(username=persona) if persona else None
    before = dump(), CalendarRule.objects.values().get()
    path = url.format(q11=demo.quotas["Quota 1.1"].pk, rule=rule.pk)
    response = getattr(login(user), method)(path, {})
    if persona is None:
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    elif persona != "admin":
        assert response.status_code == 404
    else:
        assert response.status_code == 200  # a form (an empty POST is invalid) or a confirm
    assert (dump(), CalendarRule.objects.values().get()) == before


def test_the_quota_tree_links_the_calendar(demo: Demo, admin: Any, login: Callable) -> None:
    page = login(admin).get("/quotas/").content.decode()
    assert 'href="/quotas/calendar/" data-testid="quota-calendar">Quota calendar</a>' in page


def test_creating_a_rule_lands_on_its_page_with_its_blast_radius_and_what_if(
    demo: Demo,
    admin: Any,
    bob: Any,
    login: Callable,
    submit: Callable[..., Workload],
    tick: Callable[..., None],
) -> None:
    # Bob runs 48 GPUs In Quota in Quota 1.1: "first" then "second", 24 GPUs each.
    submit(bob, "first", replicas=3)
    tick(1)
    submit(bob, "second", replicas=3)
    tick(30)
    client = login(admin)
    form = _form(
        demo,
        name="lend-to-c",
        quota=str(demo.quotas["Quota 1.1"].pk),
        target=str(demo.quotas["Quota 1.2"].pk),
        gpus="24",
    )
    response = client.post("/quotas/calendar/new/", form)
    rule = CalendarRule.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/quotas/calendar/{rule.pk}/"
    assert rule.exclude_dates == ["2026-12-25", "2026-12-31"]
    assert PeriodicTask.objects.filter(pk=rule.periodic_task_id, enabled=True).exists()
    before = dump()
    page = client.get(response["Location"])
    html = page.content.decode()
    assert "Created calendar rule lend-to-c." in html
    assert "Quota 1.1: 48 → <strong>24</strong> GPUs guaranteed on A100-80G" in html
    assert "Quota 1.2: 80 → <strong>104</strong> GPUs guaranteed on A100-80G" in html
    assert [w.name for w in page.context["blast"].preview.not_in_quota] == ["second"]
    assert "would lose the In Quota label" in html
    assert dump() == before  # the preview was rolled back
    link = urlsplit(page.context["what_if"])
    assert link.path == "/what-if/new/"
    query = parse_qs(link.query)
    assert query["window"] == ["7d"]
    assert json.loads(query["changes"][0]) == [
        {
            "kind": "calendar",
            "rule": {
                "cron": "0 22 * * 1-5",
                "timezone": "Europe/Berlin",
                "exclude_dates": ["2026-12-25", "2026-12-31"],
                "action": "rebalance",
                "quota": "Quota 1.1",
                "to": "Quota 1.2",
                "gpus": 24,
                "on": None,
            },
        }
    ]
    assert 'data-testid="what-if-link"' in html


def test_a_rule_that_would_fail_now_says_so_on_its_page(
    demo: Demo, admin: Any, login: Callable
) -> None:
    rule = _rule(demo, name="b-to-80", action="scale", quota=demo.quotas["Quota 1.1"], gpus=80)
    html = login(admin).get(f"/quotas/calendar/{rule.pk}/").content.decode()
    assert 'data-testid="blast-refused"' in html
    assert "its children would need 160 GPUs" in html


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"cron": "0 22 * * mon-fry"}, "cron", "day of week &#x27;fry&#x27; is not a number"),
        ({"timezone": "Berlin"}, "timezone", "Unknown time zone"),
        ({"exclude_dates": "2026-12-25, 25.12.2026"}, "exclude_dates", "25.12.2026"),
        ({"gpus": "-3"}, "gpus", "greater than or equal to 0"),
        ({"target": ""}, "target", "Choose the sibling quota"),
        ({"action": "scale", "gpus": ""}, "gpus", "GPUs must be a whole number"),
    ],
    ids=["cron", "timezone", "exclude_dates", "gpus", "target", "scale-gpus"],
)
def test_the_form_shows_each_error_on_its_field(
    demo: Demo, admin: Any, login: Callable, change: dict[str, str], field: str, words: str
) -> None:
    response = login(admin).post("/quotas/calendar/new/", _form(demo, **change))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == [field]
    assert words.replace("&#x27;", "'") in errors[field][0]
    assert words in response.content.decode()
    assert not CalendarRule.objects.exists()


def test_editing_a_rule_moves_its_task(demo: Demo, admin: Any, login: Callable) -> None:
    rule = _rule(demo)
    response = login(admin).post(
        f"/quotas/calendar/{rule.pk}/", _form(demo, cron="0 21 * * 1-5", enabled="")
    )
    assert response.status_code == 302
    rule.refresh_from_db()
    task = PeriodicTask.objects.select_related("crontab").get(pk=rule.periodic_task_id)
    assert (rule.cron, rule.enabled) == ("0 21 * * 1-5", False)
    assert (task.crontab.hour, task.enabled) == ("21", False)


def test_delete_asks_first_then_removes_the_rule_and_its_task(
    demo: Demo, admin: Any, login: Callable
) -> None:
    rule = _rule(demo)
    client = login(admin)
    asked = client.post(f"/quotas/calendar/{rule.pk}/delete/")
    html = asked.content.decode()
    assert [t.name for t in asked.templates][0] == "_confirm.html"
    assert "Delete calendar rule nightly-loan?" in html
    assert "It will no longer move 32 GPUs of guarantee on A100-80G from Quota 1.2 to" in html
    assert CalendarRule.objects.exists()
    done = client.post(f"/quotas/calendar/{rule.pk}/delete/", {"confirm": "1", "seen": rule.pk})
    assert done.status_code == 302 and done["Location"] == "/quotas/calendar/"
    assert not CalendarRule.objects.exists() and not PeriodicTask.objects.exists()


def test_the_lists_show_rules_cluster_wide_and_per_quota(
    demo: Demo, admin: Any, login: Callable
) -> None:
    _rule(demo)
    _rule(
        demo,
        name="weekend-lend",
        action="lend_idle",
        quota=demo.quotas["Quota 1"],
        lend_idle=True,
        cron="0 0 * * 6",
    )
    client = login(admin)
    everything = client.get("/quotas/calendar/").content.decode()
    assert 'data-rule="nightly-loan"' in everything and 'data-rule="weekend-lend"' in everything
    assert "Weekdays at 22:00" in everything and "Quota 1 lends its idle GPUs" in everything
    of_b = client.get(f"/quotas/{demo.quotas['Quota 1.1'].pk}/calendar/").content.decode()
    assert 'data-rule="nightly-loan"' in of_b and 'data-rule="weekend-lend"' not in of_b


def test_the_calendar_list_and_api_list_make_a_fixed_number_of_queries(
    demo: Demo, admin: Any, login: Callable
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    client = login(admin)
    api = APIClient()
    api.force_authenticate(admin)

    def queries() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as page:
            assert client.get("/quotas/calendar/").status_code == 200
        with CaptureQueriesContext(connection) as listed:
            assert api.get("/api/v1/quota-calendar/").status_code == 200
        return len(page), len(listed)

    _rule(demo, name="loan 0")
    one = queries()
    for i in range(1, 6):
        _rule(demo, name=f"loan {i}")
    CalendarRule.objects.update(last_outcome="failed")  # the notice lists all six
    assert queries() == one
