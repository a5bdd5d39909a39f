"""The embedded server's SQLite backend queues its writers in the process (console/fast/sqlite)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections, transaction

from console.fast.sqlite import base
from jobs.models import ControlState

from .locks import WatchedLock, queued_writers

pytestmark = pytest.mark.django_db(transaction=True)


@queued_writers
def test_a_second_writer_starts_when_the_first_commits(monkeypatch: Any) -> None:
    lock = WatchedLock()
    monkeypatch.setattr(base, "_writer", lock)
    ControlState.objects.create(pk=1, cycles=0)
    order: list[str] = []
    errors: list[BaseException] = []

    def second() -> None:
        try:
            with transaction.atomic():
                order.append("second began")
                ControlState.objects.filter(pk=1).update(cycles=2)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    with transaction.atomic():
        ControlState.objects.filter(pk=1).update(cycles=1)
        other = threading.Thread(target=second)
        other.start()
        assert lock.waiting.wait(20), "the second writer never queued"
        order.append("first commits")
    other.join(20)
    assert not errors
    assert order == ["first commits", "second began"]
    assert ControlState.objects.get(pk=1).cycles == 2
    assert not lock.locked()


@queued_writers
def test_a_failed_transaction_lets_the_next_writer_in() -> None:
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        ControlState.objects.create(pk=1, cycles=0)
        _ = 1 / 0
    assert not base._writer.locked()
    with transaction.atomic():
        ControlState.objects.create(pk=1, cycles=0)
    assert ControlState.objects.count() == 1
