"""The served app's report path answers exactly as the Django view, without its handler chain."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.signals import request_started
from django.test import Client

from console.serving import ThreadedASGIHandler
from jobs.models import Workload
from jobs.reports import live
from jobs.reports.buffer import BUFFER
from jobs.reports.tokens import report_token
from tests.api.test_serving import _call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_buffer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts and ends with nothing buffered and no attempt known live."""
    monkeypatch.setattr(live, "_live", frozenset())
    BUFFER.drain()
    yield
    BUFFER.drain()


def test_reports_answer_alike_both_ways_and_skip_the_handler_chain(
    submit: Callable[..., Workload], alice: Any, tick: Callable[..., None], client: Client
) -> None:
    job = submit(alice, "train", replicas=1, gpus=1)
    tick(0)
    token = report_token(job.pods.get())
    assert live.known_live_refresh() == 1  # answered on the event loop, no query
    later = submit(alice, "later", replicas=1, gpus=1)
    tick(0)  # not known yet: its report reads its attempt on the report thread
    cases: list[tuple[str | None, bytes]] = [
        (f"Bearer {token}", b'{"progress": 0.5, "heartbeat": true}'),
        (f"Bearer {report_token(later.pods.get())}", b'{"heartbeat": true}'),
        (f"Bearer {token}", b'{"progress": 7}'),
        (f"Bearer {token}", b""),
        (f"Bearer {token}", b"x" * 5000),
        ("Bearer 1.2.3.abc", b'{"heartbeat": true}'),
        (None, b'{"heartbeat": true}'),
    ]
    started: list[object] = []

    def count(**kwargs: Any) -> None:
        started.append(kwargs)

    app = ThreadedASGIHandler(read_threads=1, write_threads=1)
    request_started.connect(count)
    try:
        served = [
            _call(
                app,
                "POST",
                "/api/v1/report/",
                body,
                host="127.0.0.1",
                content_type="application/json",
                **({} if auth is None else {"authorization": auth}),
            )
            for auth, body in cases
        ]
    finally:
        request_started.disconnect(count)
    assert started == []  # no Django request for any of them
    assert len(BUFFER) == 2  # the two reports taken
    for (auth, body), fast in zip(cases, served, strict=True):
        headers = {} if auth is None else {"Authorization": auth}
        stock = client.post(
            "/api/v1/report/", data=body, content_type="application/json", headers=headers
        )
        assert (fast["status"], json.loads(fast["body"])) == (stock.status_code, stock.json())
    assert [a["status"] for a in served] == [202, 202, 400, 400, 400, 403, 401]
