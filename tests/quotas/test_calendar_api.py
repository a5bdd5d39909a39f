"""The quota calendar API (/api/v1/quota-calendar/): platform admins only, errors keyed by
field, and the beat task follows every write."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django_celery_beat.models import PeriodicTask

from console.demo import Demo
from quotas.models import CalendarRule
from quotas.services.calendar import calendar_rule_create
from tests.api.conftest import api  # noqa: F401  (the token-authenticated client fixture)

pytestmark = pytest.mark.django_db
URL = "/api/v1/quota-calendar/"
BODY = {
    "name": "nightly-loan",
    "action": "rebalance",
    "quota": "Quota 1.2",
    "to": "Quota 1.1",
    "gpus": 32,
    "cron": "0 22 * * 1-5",
    "timezone": "Europe/Berlin",
    "exclude_dates": ["2026-12-25"],
}


@pytest.fixture
def rule(demo: Demo) -> CalendarRule:
    """Team B's nightly loan from team C."""
    return calendar_rule_create(
        now=datetime(2026, 11, 1, tzinfo=UTC),
        name="loan",
        cron="0 22 * * 1-5",
        timezone="UTC",
        action="rebalance",
        quota=demo.quotas["Quota 1.2"],
        target=demo.quotas["Quota 1.1"],
        gpus=32,
    )


CASES = [
    ("list", "get", URL, None, {"admin": 200, "member": 200}),
    ("retrieve", "get", URL + "{rule}/", None, {"admin": 200, "member": 404}),
    ("create", "post", URL, BODY, {"admin": 201, "member": 403}),
    ("update", "patch", URL + "{rule}/", {"gpus": 8}, {"admin": 200, "member": 403}),
    ("delete", "delete", URL + "{rule}/", None, {"admin": 204, "member": 403}),
]


@pytest.mark.parametrize(
    ("name", "method", "url", "body", "expect"), CASES, ids=[c[0] for c in CASES]
)
def test_permission_matrix(
    api: Callable[[Any], Any],  # noqa: F811
    rule: CalendarRule,
    name: str,
    method: str,
    url: str,
    body: Any,
    expect: dict[str, int],
) -> None:
    users = get_user_model().objects
    path = url.format(rule=rule.pk)
    got, want = {}, {}
    for persona in ("admin", "alice", "bob", "carol", None):
        user = users.get(username=persona) if persona else None
        with transaction.atomic():
            response = getattr(api(user), method)(path, body, format="json")
            seen = (
                response.json()["count"] if name == "list" and response.status_code == 200 else None
            )
            transaction.set_rollback(True)
        want[persona] = (
            401 if persona is None else expect["admin" if persona == "admin" else "member"]
        )
        got[persona] = response.status_code
        if name == "list" and persona:
            want[persona] = (want[persona], 1 if persona == "admin" else 0)
            got[persona] = (response.status_code, seen)
    assert got == want


def test_admin_creates_changes_and_deletes_a_rule_with_its_task(
    api: Callable[[Any], Any],  # noqa: F811
    admin: Any,
) -> None:
    client = api(admin)
    created = client.post(URL, BODY, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["quota"], body["to"], body["gpus"], body["node_pool"]) == (
        "Quota 1.2",
        "Quota 1.1",
        32,
        "A100-80G",
    )
    assert body["last_outcome"] == "" and body["exclude_dates"] == ["2026-12-25"]
    rule = CalendarRule.objects.get(pk=body["id"])
    task = PeriodicTask.objects.get(pk=rule.periodic_task_id)
    assert task.crontab.hour == "22" and str(task.crontab.timezone) == "Europe/Berlin"
    changed = client.patch(f"{URL}{rule.pk}/", {"cron": "0 23 * * *"}, format="json")
    assert changed.status_code == 200 and changed.json()["cron"] == "0 23 * * *"
    task.refresh_from_db()
    assert task.crontab.hour == "23"
    assert client.delete(f"{URL}{rule.pk}/").status_code == 204
    assert not CalendarRule.objects.exists() and not PeriodicTask.objects.exists()


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"cron": "0 22 * * 8"}, "cron", "day of week 8 is out of range 0-7."),
        ({"timezone": "CEST"}, "timezone", "Unknown time zone 'CEST'"),
        ({"exclude_dates": ["12/25/2026"]}, "exclude_dates", "'12/25/2026' is not a date"),
        ({"to": "Quota 1"}, "to", "Quota 1 is not a sibling of Quota 1.2"),
        ({"to": "Quota 9"}, "to", "Quota 9"),
        ({"gpus": 0}, "gpus", "at least 1"),
        ({"action": "move"}, "action", "move"),
    ],
    ids=["cron", "timezone", "exclude_dates", "to-not-sibling", "to-missing", "gpus", "action"],
)
def test_bad_input_is_a_400_keyed_by_the_field(
    api: Callable[[Any], Any],  # noqa: F811
    admin: Any,
    change: dict[str, Any],
    key: str,
    words: str,
) -> None:
    response = api(admin).post(URL, {**BODY, **change}, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [key], errors
    assert words in str(errors[key])
    assert not CalendarRule.objects.exists() and not PeriodicTask.objects.exists()
