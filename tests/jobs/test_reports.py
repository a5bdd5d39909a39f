"""The report endpoint: tokens per attempt, the permission matrix, coalesced conditional writes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.clock import ManualClock
from jobs.choices import EventKind, PodStatus, Status
from jobs.models import Pod, Workload
from jobs.reports import live
from jobs.reports.accept import report_accept, report_answer_unread
from jobs.reports.buffer import BUFFER
from jobs.reports.env import report_env
from jobs.reports.tokens import report_token
from jobs.services.workloads import workload_cancel

URL = "/api/v1/report/"


@pytest.fixture(autouse=True)
def empty_buffer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts and ends with nothing buffered and no attempt known live."""
    monkeypatch.setattr(live, "_live", frozenset())
    BUFFER.drain()
    yield
    BUFFER.drain()


@pytest.fixture
def running(
    submit: Callable[..., Workload], alice: Any, bob: Any, tick: Callable[..., None]
) -> tuple[Workload, Workload]:
    """Alice's two-replica job and Bob's one-replica job, both Running."""
    mine = submit(alice, "train", replicas=2, gpus=1, total_work=1000.0)
    theirs = submit(bob, "other", replicas=1, gpus=1)
    tick(0)
    tick(30)
    for job in (mine, theirs):
        job.refresh_from_db()
        assert job.status == Status.RUNNING
    return mine, theirs


def pods(workload: Workload) -> list[Pod]:
    """The workload's live pods by replica index."""
    return list(workload.pods.filter(status__in=["Pending", "Running"]).order_by("index"))


def post(client: Client, body: Any, token: str | None) -> Any:
    """POST a report (a dict is sent as JSON, bytes as they are)."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    data = body if isinstance(body, bytes) else json.dumps(body)
    return client.post(URL, data=data, content_type="application/json", headers=headers)


def test_a_pod_environment_names_the_endpoint_its_token_and_its_resume_point(
    running: tuple[Workload, Workload], settings: Any
) -> None:
    settings.TIDEPOOL_REPORT_URL = "http://console.tidepool:8000/"
    pod = pods(running[0])[0]
    env = report_env(pod)
    assert env == {
        "TIDEPOOL_REPORT_URL": "http://console.tidepool:8000/api/v1/report/",
        "TIDEPOOL_REPORT_TOKEN": report_token(pod),
    }
    assert env["TIDEPOOL_REPORT_TOKEN"].startswith(f"{pod.pk}.{pod.workload_id}.{pod.attempt}.")
    pod.resume_from = "step-4000"
    assert report_env(pod)["TIDEPOOL_RESUME_FROM"] == "step-4000"


def test_each_replica_attempt_has_its_own_token(running: tuple[Workload, Workload]) -> None:
    first, second = pods(running[0])
    assert report_token(first) != report_token(second)
    first.attempt += 1  # what the next attempt of this replica would sign
    assert report_token(first) != report_token(pods(running[0])[0])


def test_own_token_is_accepted_and_written_at_the_flush(
    running: tuple[Workload, Workload], client: Client, clock: ManualClock
) -> None:
    mine, theirs = running
    rank0 = pods(mine)[0]
    answer = post(client, {"progress": 0.25, "checkpoint": 1200}, report_token(rank0))
    assert answer.status_code == 202, answer.content
    rank0.refresh_from_db()
    assert rank0.reported_progress is None  # buffered: nothing written yet
    assert BUFFER.flush() == 1
    rank0.refresh_from_db()
    mine.refresh_from_db()
    assert rank0.reported_progress == 0.25
    assert rank0.last_heartbeat_at == clock.now()
    assert mine.progress == 250.0  # a quarter of total_work
    assert mine.checkpoint_label == "1200"
    assert mine.last_checkpoint_at == clock.now()
    event = mine.events.get(kind=EventKind.CHECKPOINT)
    assert event.data == {"label": "1200", "replica": 0}
    theirs.refresh_from_db()
    assert theirs.checkpoint_label == "" and not theirs.events.filter(kind="checkpoint").exists()


def test_another_workloads_token_cannot_report_for_this_one(
    running: tuple[Workload, Workload], client: Client
) -> None:
    mine, theirs = running
    bobs = report_token(pods(theirs)[0])
    pod, _, attempt, signature = bobs.split(".")
    # Bob's signed token with Alice's workload put in: the signature no longer matches.
    forged = f"{pod}.{mine.pk}.{attempt}.{signature}"
    answer = post(client, {"checkpoint": "x"}, forged)
    assert answer.status_code == 403
    assert answer.json() == {"detail": "This is not a report token of this console."}
    # A replica of Alice's job signed with another replica's signature: refused too.
    alices = pods(mine)[1]
    answer = post(client, {"heartbeat": True}, f"{alices.pk}.{mine.pk}.0.{signature}")
    assert answer.status_code == 403
    BUFFER.flush()
    mine.refresh_from_db()
    assert mine.checkpoint_label == ""
    assert all(p.last_heartbeat_at is None for p in pods(mine))


def test_an_ended_attempts_token_is_refused(
    running: tuple[Workload, Workload], client: Client, alice: Any, clock: ManualClock
) -> None:
    mine, _ = running
    token = report_token(pods(mine)[0])
    workload_cancel(actor=alice, workload=mine, now=clock.now())
    answer = post(client, {"heartbeat": True}, token)
    assert answer.status_code == 403
    assert "no longer running" in answer.json()["detail"]


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Token abc", "Bearer garbage", "Bearer 1.2.3.4", "Bearer ..."],
    ids=["none", "empty", "no-token", "other-scheme", "garbage", "unsigned", "dots"],
)
def test_without_a_valid_token_nothing_is_taken(
    running: tuple[Workload, Workload], client: Client, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    answer = client.post(
        URL, data='{"heartbeat": true}', content_type="application/json", headers=headers
    )
    scheme = (authorization or "").partition(" ")
    if scheme[0].lower() == "bearer" and scheme[2].strip():
        assert answer.status_code == 403
    else:
        assert answer.status_code == 401
        assert answer["WWW-Authenticate"] == "Bearer"
    assert len(BUFFER) == 0


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        (b"", "non_field_errors", "Send a JSON object"),
        ({}, "non_field_errors", "Send a JSON object"),
        (b"{not json", "non_field_errors", "not JSON"),
        ([0.5], "non_field_errors", "Send a JSON object"),
        ({"progress": 1.5}, "progress", "from 0 to 1, not 1.5"),
        ({"progress": "half"}, "progress", "a number from 0 to 1"),
        ({"progress": True}, "progress", "a number from 0 to 1"),
        ({"checkpoint": ""}, "checkpoint", "cannot be empty"),
        ({"checkpoint": "x" * 201}, "checkpoint", "at most 200 characters, not 201"),
        ({"checkpoint": ["a"]}, "checkpoint", "text or a number, not list"),
        ({"heartbeat": False}, "heartbeat", "as true"),
        ({"activity": "yes"}, "activity", "as true"),
        ({"heartbeat": True, "loss": 0.1}, "loss", "Unknown field"),
    ],
    ids=[
        "empty-body",
        "empty-object",
        "not-json",
        "a-list",
        "progress-over-1",
        "progress-text",
        "progress-bool",
        "empty-label",
        "long-label",
        "label-list",
        "heartbeat-false",
        "activity-text",
        "unknown-field",
    ],
)
def test_a_malformed_body_is_refused_naming_the_field(
    running: tuple[Workload, Workload], client: Client, body: Any, field: str, reason: str
) -> None:
    answer = post(client, body, report_token(pods(running[0])[0]))
    assert answer.status_code == 400
    (message,) = answer.json()[field]
    assert reason in message
    assert len(BUFFER) == 0


def test_the_endpoint_needs_no_session_nor_csrf_token(
    running: tuple[Workload, Workload],
) -> None:
    strict = Client(enforce_csrf_checks=True)
    answer = post(strict, {"activity": True}, report_token(pods(running[0])[0]))
    assert answer.status_code == 202
    assert strict.get(URL).status_code == 405


def test_many_reports_make_one_write_per_table_per_flush(
    running: tuple[Workload, Workload], client: Client, clock: ManualClock
) -> None:
    mine, theirs = running
    replicas = pods(mine) + pods(theirs)
    for step in range(10):
        clock.advance(1)
        for pod in replicas:
            body = {"progress": step / 10, "heartbeat": True, "checkpoint": f"s{step}"}
            assert post(client, body, report_token(pod)).status_code == 202
    with CaptureQueriesContext(connection) as queries:
        assert BUFFER.flush() == 3
    writes = [
        q["sql"].split()[0]
        for q in queries
        if not q["sql"].startswith(("SELECT", "SAVEPOINT", "RELEASE", "BEGIN", "COMMIT"))
    ]
    # One UPDATE of the pods, one of the workloads, one INSERT of the checkpoint events.
    assert sorted(writes) == ["INSERT", "UPDATE", "UPDATE"], queries.captured_queries
    mine.refresh_from_db()
    assert mine.progress == pytest.approx(900.0)  # replica 0's last report: 0.9
    assert mine.checkpoint_label == "s9"
    assert mine.events.filter(kind=EventKind.CHECKPOINT).count() == 1
    assert {p.reported_progress for p in pods(mine)} == {0.9}
    assert BUFFER.flush() == 0  # nothing left


def test_a_report_of_an_attempt_that_ended_before_the_flush_writes_nothing(
    running: tuple[Workload, Workload], client: Client, alice: Any, clock: ManualClock
) -> None:
    mine, _ = running
    first = pods(mine)[0]
    before = Workload.objects.values().get(pk=mine.pk)
    body = {"progress": 0.5, "checkpoint": "late", "activity": True}
    assert post(client, body, report_token(first)).status_code == 202
    clock.advance(5)
    workload_cancel(actor=alice, workload=mine, now=clock.now())
    assert BUFFER.flush() == 0
    after = Workload.objects.values().get(pk=mine.pk)
    reported = ("progress", "last_progress_at", "checkpoint_label", "last_checkpoint_at")
    assert [after[k] for k in reported] == [before[k] for k in reported]
    assert after["checkpoint_label"] == "" and after["last_activity_at"] is None
    first.refresh_from_db()
    assert first.status != PodStatus.RUNNING
    assert first.reported_progress is None and first.last_heartbeat_at is None
    assert not mine.events.filter(kind=EventKind.CHECKPOINT).exists()


def test_an_older_report_never_moves_a_time_backwards(
    running: tuple[Workload, Workload], client: Client, clock: ManualClock
) -> None:
    mine, _ = running
    token = report_token(pods(mine)[0])
    clock.advance(60)
    post(client, {"checkpoint": "new", "progress": 0.6}, token)
    BUFFER.flush()
    # What another web process buffered a minute earlier, flushed after this one.
    clock.advance(-30)
    post(client, {"checkpoint": "old", "progress": 0.3}, token)
    BUFFER.flush()
    mine.refresh_from_db()
    assert (mine.checkpoint_label, mine.progress) == ("new", 600.0)
    assert pods(mine)[0].reported_progress == 0.6


def test_attempts_live_at_the_last_read_report_without_a_query(
    running: tuple[Workload, Workload], alice: Any, clock: ManualClock
) -> None:
    mine, theirs = running
    assert live.known_live_refresh() == 3
    auth = f"Bearer {report_token(pods(theirs)[0])}"
    with CaptureQueriesContext(connection) as queries:
        answer = report_answer_unread(authorization=auth, body=b'{"heartbeat": true}')
    assert answer is not None and answer.status == 202
    assert len(queries) == 0
    # Ended since the last read: still taken until the next one, and the flush drops it.
    token = report_token(pods(mine)[0])
    workload_cancel(actor=alice, workload=mine, now=clock.now())
    taken = report_answer_unread(authorization=f"Bearer {token}", body=b'{"checkpoint": "9"}')
    assert taken is not None and taken.status == 202
    BUFFER.flush()
    mine.refresh_from_db()
    assert mine.checkpoint_label == ""
    # After the next read it is refused.
    live.known_live_refresh()
    unread = report_answer_unread(authorization=f"Bearer {token}", body=b'{"heartbeat": true}')
    assert unread is None  # not known live: the caller reads the attempt
    answer = report_accept(authorization=f"Bearer {token}", body=b'{"heartbeat": true}')
    assert answer.status == 403


def test_a_requeue_resumes_the_shown_progress_from_the_reported_checkpoint(
    running: tuple[Workload, Workload], client: Client, clock: ManualClock
) -> None:
    mine, _ = running
    token = report_token(pods(mine)[0])
    post(client, {"progress": 0.4}, token)
    BUFFER.flush()
    clock.advance(60)
    post(client, {"checkpoint": "step-400", "progress": 0.5}, token)
    BUFFER.flush()
    mine.refresh_from_db()
    # The checkpoint keeps the progress stored before it, never a later report's.
    assert (mine.checkpoint_label, mine.checkpoint_progress, mine.progress) == (
        "step-400",
        400.0,
        500.0,
    )
