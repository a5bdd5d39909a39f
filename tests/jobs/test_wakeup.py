"""Cycle wake-ups: a burst queues one Celery cycle, and a failed wake-up never fails a submit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from kombu.exceptions import OperationalError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from jobs import tasks, wakeup
from jobs.choices import Status
from jobs.models import Workload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """The distributed mode's wake-up, with the cycle messages it sends recorded, not sent."""
    messages: list[dict[str, Any]] = []
    monkeypatch.setattr(wakeup, "_listeners", [wakeup.cycle_queue])
    monkeypatch.setattr(
        tasks.scheduling_cycle, "apply_async", lambda **options: messages.append(options)
    )
    cache.delete(wakeup.QUEUED_KEY)
    yield messages
    cache.delete(wakeup.QUEUED_KEY)


def test_a_burst_of_submits_queues_one_cycle_and_requests_during_a_cycle_queue_one_more(
    submit: Callable[..., Workload], bob: Any, sim: Any, sent: list[dict[str, Any]]
) -> None:
    first = [submit(bob, f"burst-{i}", gpus=1) for i in range(8)]
    assert len(sent) == 1

    tasks.scheduling_cycle()  # the worker takes the message: the cycle starts
    assert Workload.objects.filter(pk__in=[j.pk for j in first], status=Status.RUNNING).count() == 8

    second = [submit(bob, f"during-{i}", gpus=1) for i in range(5)]
    assert len(sent) == 2
    tasks.scheduling_cycle()
    assert (
        Workload.objects.filter(pk__in=[j.pk for j in second], status=Status.RUNNING).count() == 5
    )
    assert all(options["expires"] == wakeup.QUEUED_SECONDS for options in sent)


def test_a_failed_send_lets_the_next_request_try_again(
    submit: Callable[..., Workload], bob: Any, sim: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def broker_down(**options: Any) -> None:
        calls.append(1)
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    monkeypatch.setattr(wakeup, "_listeners", [wakeup.cycle_queue])
    monkeypatch.setattr(tasks.scheduling_cycle, "apply_async", broker_down)
    submit(bob, "one", gpus=1)
    submit(bob, "two", gpus=1)
    assert len(calls) == 2  # no key left behind claims a cycle is queued


def test_a_submit_answers_201_when_the_broker_is_down(
    demo: Any, bob: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broker_down() -> None:
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    monkeypatch.setattr(wakeup, "_listeners", [broker_down])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=bob).key}")
    body = {"workspace": "workspace_b", "name": "committed", "gpu": 1, "replicas": 1}
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201
    assert Workload.objects.filter(name="committed", status=Status.QUEUED).exists()
    # A retry by the client is told the truth: the job exists.
    assert client.post("/api/v1/jobs/", body, format="json").status_code == 409


def test_a_cycle_that_places_pods_asks_for_one_sync_when_the_first_is_due(
    submit: Callable[..., Workload],
    bob: Any,
    sim: Any,
    clock: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pods start `start_delay` after placement: the sync that sees them Running is asked for
    then, once per second however many cycles ask, not left to beat's next 5 s tick."""
    syncs: list[dict[str, Any]] = []
    monkeypatch.setattr(wakeup, "_sync_listeners", [wakeup.sync_queue])
    monkeypatch.setattr(tasks.backend_sync, "apply_async", lambda **options: syncs.append(options))
    monkeypatch.setattr(wakeup, "_listeners", [])
    cache.clear()  # sync marks other tests left for the same simulated seconds
    first = submit(bob, "first", gpus=1)
    tasks.scheduling_cycle()
    assert first.pods.get().start_after == clock.now() + timedelta(seconds=sim.start_delay)
    assert [s["countdown"] for s in syncs] == [sim.start_delay]
    submit(bob, "same-second", gpus=1)
    tasks.scheduling_cycle()
    assert len(syncs) == 1  # its pod is due in the same second: that sync sees it too
    clock.advance(2)
    submit(bob, "later", gpus=1)
    tasks.scheduling_cycle()
    assert [s["countdown"] for s in syncs] == [sim.start_delay, sim.start_delay]
