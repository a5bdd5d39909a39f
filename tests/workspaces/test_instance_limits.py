"""Interactive time limits of a workspace: the service's rules and the Time Limits tab."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from cluster.locking import state_version
from console.clock import ManualClock, set_clock
from console.demo import Demo
from console.errors import DomainError
from jobs.choices import EventKind, Kind, Status
from jobs.models import Workload, WorkloadEvent
from workspaces.choices import Role
from workspaces.models import Workspace
from workspaces.services import workspace_instance_limits_set, workspace_member_add

NOW = datetime(2026, 6, 2, 18, 0, tzinfo=UTC)
HOUR = 3600
TEN_YEARS = 87600 * HOUR


@pytest.fixture(autouse=True)
def frozen() -> Iterator[None]:
    """The control loop's clock stands at NOW (pages show how long instances have run)."""
    previous = set_clock(ManualClock(NOW))
    yield
    set_clock(previous)


def _limits(name: str) -> tuple[int | None, int | None]:
    ws = Workspace.objects.get(name=name)
    return ws.instance_default_duration, ws.instance_max_duration


@pytest.fixture
def instance(demo: Demo, alice: Any) -> Any:
    """Make a workload in workspace_a (an interactive instance unless told otherwise)."""

    def make(name: str, *, limit: int | None, ran: float | None = 1, **fields: Any) -> Workload:
        values: dict[str, Any] = {
            "kind": Kind.INTERACTIVE,
            "status": Status.RUNNING if ran is not None else Status.QUEUED,
            "gpu": 1000,
            "max_duration": limit,
            "submitted_at": NOW - timedelta(days=30),
            "started_at": None if ran is None else NOW - timedelta(hours=ran),
            "workspace": demo.workspaces["workspace_a"],
            "owner": alice,
            **fields,
        }
        return Workload.objects.create(name=name, quota=demo.quotas["Quota 1"], **values)

    return make


# The service -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("default", "maximum", "field", "message"),
    [
        (
            10 * HOUR,
            8 * HOUR,
            "instance_default_duration",
            "The default duration (10 h) may not be longer than the maximum (8 h).",
        ),
        (59, None, "instance_default_duration", "at least 60 s, not 59 s"),
        (None, 30, "instance_max_duration", "at least 60 s, not 30 s"),
        (None, 2**31, "instance_max_duration", "at most 2,147,483,647 s"),
    ],
    ids=["default-above-max", "default-too-short", "max-too-short", "max-past-the-column"],
)
def test_limits_that_break_a_rule_are_refused_naming_the_field(
    demo: Demo, admin: Any, default: int | None, maximum: int | None, field: str, message: str
) -> None:
    with pytest.raises(DomainError) as refused:
        workspace_instance_limits_set(
            actor=admin,
            workspace=demo.workspaces["workspace_c"],
            default_duration=default,
            max_duration=maximum,
            now=NOW,
        )
    assert refused.value.field == field
    assert message in refused.value.message
    assert _limits("workspace_c") == (None, None)


def test_limits_are_saved_and_either_may_be_left_empty(demo: Demo, admin: Any) -> None:
    ws = demo.workspaces["workspace_c"]
    saved = workspace_instance_limits_set(
        actor=admin, workspace=ws, default_duration=2 * HOUR, max_duration=8 * HOUR, now=NOW
    )
    assert (saved.workspace.instance_default_duration, saved.shortened) == (2 * HOUR, [])
    assert _limits("workspace_c") == (2 * HOUR, 8 * HOUR)
    workspace_instance_limits_set(
        actor=admin, workspace=ws, default_duration=None, max_duration=8 * HOUR, now=NOW
    )
    assert _limits("workspace_c") == (None, 8 * HOUR)
    workspace_instance_limits_set(
        actor=admin, workspace=ws, default_duration=HOUR, max_duration=None, now=NOW
    )
    assert _limits("workspace_c") == (HOUR, None)


def test_a_limit_left_out_is_kept_and_lowering_only_the_max_under_the_default_names_the_max(
    demo: Demo, admin: Any
) -> None:
    ws = demo.workspaces["workspace_c"]
    workspace_instance_limits_set(
        actor=admin, workspace=ws, default_duration=4 * HOUR, max_duration=8 * HOUR, now=NOW
    )
    workspace_instance_limits_set(actor=admin, workspace=ws, max_duration=6 * HOUR, now=NOW)
    assert _limits("workspace_c") == (4 * HOUR, 6 * HOUR)
    with pytest.raises(DomainError) as refused:
        workspace_instance_limits_set(actor=admin, workspace=ws, max_duration=2 * HOUR, now=NOW)
    assert refused.value.field == "instance_max_duration"
    assert refused.value.message == (
        "The default duration (4 h) may not be longer than the maximum (2 h)."
    )
    assert _limits("workspace_c") == (4 * HOUR, 6 * HOUR)


def test_the_database_refuses_a_default_above_the_max(demo: Demo) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Workspace.objects.filter(name="workspace_c").update(
            instance_default_duration=9 * HOUR, instance_max_duration=8 * HOUR
        )


def test_lowering_the_max_lowers_active_instances_above_it_each_with_an_event(
    demo: Demo, admin: Any, instance: Any, bob: Any
) -> None:
    long = instance("long", limit=TEN_YEARS)
    instance("queued", limit=TEN_YEARS, ran=None)
    unlimited = instance("unlimited", limit=None)
    instance("short", limit=2 * HOUR)
    instance("ended", limit=TEN_YEARS, status=Status.STOPPED)
    instance("train", limit=None, kind=Kind.TRAINING)
    instance("elsewhere", limit=TEN_YEARS, workspace=demo.workspaces["workspace_b"], owner=bob)
    saved = workspace_instance_limits_set(
        actor=admin, workspace=demo.workspaces["workspace_a"], max_duration=8 * HOUR, now=NOW
    )
    assert [w.name for w in saved.shortened] == ["long", "queued", "unlimited"]
    limits = {w.name: w.max_duration for w in Workload.objects.all()}
    assert limits == {
        "long": 8 * HOUR,
        "queued": 8 * HOUR,
        "unlimited": 8 * HOUR,
        "short": 2 * HOUR,
        "ended": TEN_YEARS,
        "train": None,
        "elsewhere": TEN_YEARS,
    }
    events = WorkloadEvent.objects.filter(kind=EventKind.LIMIT)
    assert sorted(e.workload.name for e in events) == ["long", "queued", "unlimited"]
    event = events.get(workload=long)
    assert event.at == NOW
    assert event.message == (
        "Time limit lowered from 87600 h to 8 h: admin capped interactive instances in "
        "workspace_a at 8 h."
    )
    assert event.data == {"max_duration": 8 * HOUR, "was": TEN_YEARS}
    assert events.get(workload=unlimited).message.startswith("Time limit lowered from no limit")


def test_an_instance_already_past_the_new_max_is_told_it_stops_at_the_next_check(
    demo: Demo, admin: Any, instance: Any
) -> None:
    past = instance("past", limit=TEN_YEARS, ran=9)
    workspace_instance_limits_set(
        actor=admin, workspace=demo.workspaces["workspace_a"], max_duration=8 * HOUR, now=NOW
    )
    past.refresh_from_db()
    assert past.status == Status.RUNNING  # the time-limits task stops it (tests/jobs)
    event = WorkloadEvent.objects.get(workload=past, kind=EventKind.LIMIT)
    assert event.message.endswith(
        "It has run longer than that, so it stops at the next time-limit check."
    )


@pytest.mark.parametrize("maximum", [None, 20 * HOUR], ids=["removed", "raised"])
def test_raising_or_removing_the_max_leaves_every_instance_as_it_was(
    demo: Demo, admin: Any, instance: Any, maximum: int | None
) -> None:
    ws = demo.workspaces["workspace_a"]
    workspace_instance_limits_set(actor=admin, workspace=ws, max_duration=8 * HOUR, now=NOW)
    notebook = instance("notebook", limit=4 * HOUR)
    saved = workspace_instance_limits_set(actor=admin, workspace=ws, max_duration=maximum, now=NOW)
    assert saved.shortened == []
    notebook.refresh_from_db()
    assert notebook.max_duration == 4 * HOUR
    assert not WorkloadEvent.objects.filter(kind=EventKind.LIMIT).exists()


def test_setting_limits_takes_the_write_lock_before_reading_the_instances(
    demo: Demo, admin: Any, instance: Any
) -> None:
    instance("long", limit=TEN_YEARS)
    before = state_version()
    with CaptureQueriesContext(connection) as queries:
        workspace_instance_limits_set(
            actor=admin, workspace=demo.workspaces["workspace_a"], max_duration=HOUR, now=NOW
        )
    assert state_version() == before + 1
    sql = [q["sql"] for q in queries.captured_queries]
    lock = next(i for i, q in enumerate(sql) if "jobs_writelock" in q)
    reads = [i for i, q in enumerate(sql) if 'FROM "jobs_workload"' in q]
    assert reads and lock < min(reads)


# The Time Limits tab ---------------------------------------------------------------------------


def _url(ws: str = "workspace_a") -> str:
    return reverse("workspaces:time_limits", args=[ws])


def test_admin_sets_the_limits_and_is_told_which_instances_got_the_new_max(
    demo: Demo, login: Any, admin: Any, instance: Any
) -> None:
    instance("notebook", limit=TEN_YEARS)
    client = login(admin)
    response = client.post(_url(), {"default_hours": "2", "max_hours": "8.5"}, follow=True)
    assert response.redirect_chain == [(_url(), 302)]
    assert _limits("workspace_a") == (2 * HOUR, 8 * HOUR + 1800)
    body = response.content.decode()
    assert (
        "Time limits saved: default 2 h, at most 8 h 30 min. 1 active instance now has the "
        "new maximum: notebook." in body
    )
    assert 'name="default_hours" value="2"' in body and 'name="max_hours" value="8.5"' in body
    assert '<span data-field="limit">8 h 30 min</span>' in body


def test_empty_fields_remove_the_limits(demo: Demo, login: Any, admin: Any) -> None:
    Workspace.objects.filter(name="workspace_a").update(
        instance_default_duration=HOUR, instance_max_duration=2 * HOUR
    )
    response = login(admin).post(_url(), {"default_hours": "", "max_hours": ""})
    assert response.status_code == 302
    assert _limits("workspace_a") == (None, None)


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (
            {"default_hours": "10", "max_hours": "8"},
            "default_hours",
            "The default duration (10 h) may not be longer than the maximum (8 h).",
        ),
        ({"default_hours": "", "max_hours": "0.01"}, "max_hours", "at least 60 s, not 36 s"),
        ({"default_hours": "two", "max_hours": ""}, "default_hours", "Enter a number."),
        ({"default_hours": "", "max_hours": "-1"}, "max_hours", "greater than or equal to 0"),
    ],
    ids=["default-above-max", "max-too-short", "not-a-number", "negative"],
)
def test_a_refused_save_shows_the_reason_on_its_field_and_saves_nothing(
    demo: Demo, login: Any, admin: Any, data: dict[str, str], field: str, message: str
) -> None:
    response = login(admin).post(_url(), data)
    assert response.status_code == 400
    assert message in " ".join(response.context["form"].errors[field])
    body = response.content.decode()
    assert f'data-field-name="{field}"' in body and "errorlist" in body
    assert _limits("workspace_a") == (None, None)


def test_a_member_sees_the_limits_read_only_and_may_not_save(
    demo: Demo, login: Any, alice: Any
) -> None:
    Workspace.objects.filter(name="workspace_a").update(
        instance_default_duration=2 * HOUR, instance_max_duration=8 * HOUR
    )
    client = login(alice)
    body = client.get(_url()).content.decode()
    assert '<td data-field="default">2 h</td>' in body
    assert '<td data-field="maximum">8 h</td>' in body
    assert 'id="limits-form"' not in body
    assert client.post(_url(), {"default_hours": "", "max_hours": ""}).status_code == 403
    assert _limits("workspace_a") == (2 * HOUR, 8 * HOUR)


def test_a_workspace_admin_may_save_but_an_outsider_gets_404(
    demo: Demo, login: Any, alice: Any, carol: Any
) -> None:
    workspace_member_add(workspace=demo.workspaces["workspace_a"], user=alice, role=Role.ADMIN)
    assert login(alice).post(_url(), {"max_hours": "8"}).status_code == 302
    assert login(carol).get(_url()).status_code == 404
    assert login(carol).post(_url(), {"max_hours": "1"}).status_code == 404
    assert _limits("workspace_a") == (None, 8 * HOUR)


def test_the_tab_lists_active_instances_longest_limit_first_for_the_preview(
    demo: Demo, login: Any, admin: Any, instance: Any, django_assert_max_num_queries: Any
) -> None:
    instance("short", limit=2 * HOUR, ran=0.5)
    instance("long", limit=TEN_YEARS, ran=9)
    instance("waiting", limit=4 * HOUR, ran=None)
    instance("done", limit=TEN_YEARS, status=Status.STOPPED)
    client = login(admin)
    with django_assert_max_num_queries(6):
        body = client.get(_url()).content.decode()
    rows = [line for line in body.splitlines() if "<tr data-name=" in line]
    assert [r.split('"')[1] for r in rows] == ["long", "waiting", "short"]
    assert f'data-name="long" data-limit="{TEN_YEARS}" data-ran="{9 * HOUR}"' in body
    assert 'data-name="waiting" data-limit="14400" data-ran=""' in body
    assert "Resource Usage" in body and 'aria-current="page">Time Limits' in body


def test_the_resource_usage_tab_links_to_time_limits(demo: Demo, login: Any, bob: Any) -> None:
    body = login(bob).get(reverse("workspaces:resource_usage", args=["workspace_b"])).content
    assert f'href="{_url("workspace_b")}"'.encode() in body


def test_an_anonymous_visitor_is_sent_to_login(demo: Demo, login: Any) -> None:
    response = login(None).post(_url(), {"max_hours": "1"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert _limits("workspace_a") == (None, None)
