"""A socket that reconnects catches up: every live event has a seq, and `{"after": seq}` replays
the stored events past it, of the socket's own scope only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from console.asgi import application
from jobs import consumers
from jobs.consumers import events_of
from jobs.models import WorkloadEvent

pytestmark = pytest.mark.django_db(transaction=True)


async def _open(path: str, user: Any) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://127.0.0.1")]
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _ask(communicator: WebsocketCommunicator, after: int | None) -> list[dict[str, Any]]:
    """Send `{"after": after}`; every event up to and including the closing one."""
    await communicator.send_json_to({"after": after})
    events = events_of(await communicator.receive_json_from(timeout=5))
    while events[-1].get("kind") not in {"caught_up", "resync"}:
        events += events_of(await communicator.receive_json_from(timeout=5))
    return events


def test_a_page_that_reconnects_gets_the_events_it_missed_and_none_of_other_teams(
    demo: Any, bob: Any, carol: Any, submit: Callable[..., Any], run_async: Any
) -> None:
    path = f"/ws/workspaces/{demo.workspaces['workspace_b'].pk}/"

    async def run() -> tuple[int, list[dict[str, Any]]]:
        page = await _open(path, bob)
        [where] = await _ask(page, None)
        await page.disconnect()
        await database_sync_to_async(submit)(bob, "missed-while-away", gpus=1)
        await database_sync_to_async(submit)(carol, "carol-secret", gpus=1)
        page = await _open(path, bob)
        frames = await _ask(page, where["seq"])
        await page.disconnect()
        return where["seq"], frames

    before, frames = run_async(run())
    *missed, done = frames
    stored = WorkloadEvent.objects.get(workload__name="missed-while-away", kind="submitted")
    assert [(e["name"], e["kind"], e["seq"]) for e in missed] == [
        ("missed-while-away", "submitted", stored.pk)
    ]
    assert missed[0]["status"] == "Queued"
    assert stored.pk > before
    assert done == {"kind": "caught_up", "seq": WorkloadEvent.objects.latest("id").pk}


def test_live_events_carry_the_seq_of_their_stored_entry(
    demo: Any, bob: Any, submit: Callable[..., Any], tick: Callable[..., None], run_async: Any
) -> None:
    path = f"/ws/workspaces/{demo.workspaces['workspace_b'].pk}/"

    async def run() -> list[dict[str, Any]]:
        page = await _open(path, bob)
        await database_sync_to_async(submit)(bob, "watched", gpus=1)
        await database_sync_to_async(tick)()  # the cycle's events are stored in one batch
        received = []
        while not await page.receive_nothing(timeout=0.5):
            received += events_of(await page.receive_json_from())
        await page.disconnect()
        return received

    received = run_async(run())
    stored = {
        (e.kind, e.pk) for e in WorkloadEvent.objects.filter(workload__name="watched").order_by()
    }
    assert {(e["kind"], e["seq"]) for e in received} == stored
    assert {"submitted", "admitted"} <= {kind for kind, _ in stored}


def test_a_page_that_missed_too_much_is_told_to_refetch(
    demo: Any, bob: Any, submit: Callable[..., Any], run_async: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(consumers, "CATCH_UP_LIMIT", 2)
    path = f"/ws/workspaces/{demo.workspaces['workspace_b'].pk}/"

    async def run() -> list[dict[str, Any]]:
        page = await _open(path, bob)
        [where] = await _ask(page, None)
        await page.disconnect()
        for i in range(3):
            await database_sync_to_async(submit)(bob, f"many-{i}", gpus=1)
        page = await _open(path, bob)
        frames = await _ask(page, where["seq"])
        await page.disconnect()
        return frames

    assert run_async(run()) == [{"kind": "resync", "seq": WorkloadEvent.objects.latest("id").pk}]


def test_the_quota_feed_replays_only_its_quota(
    demo: Any, admin: Any, bob: Any, carol: Any, submit: Callable[..., Any], run_async: Any
) -> None:
    quota = demo.workspaces["workspace_b"].quotas.get()

    async def run() -> list[dict[str, Any]]:
        feed = await _open(f"/ws/quotas/{quota.pk}/", admin)
        [where] = await _ask(feed, None)
        await feed.disconnect()
        await database_sync_to_async(submit)(bob, "in-this-quota", gpus=1)
        await database_sync_to_async(submit)(carol, "in-another-quota", gpus=1)
        feed = await _open(f"/ws/quotas/{quota.pk}/", admin)
        frames = await _ask(feed, where["seq"])
        await feed.disconnect()
        return frames

    assert [f.get("name") for f in run_async(run())] == ["in-this-quota", None]


def test_anything_but_a_catch_up_request_is_ignored(demo: Any, bob: Any, run_async: Any) -> None:
    path = f"/ws/workspaces/{demo.workspaces['workspace_b'].pk}/"

    async def run() -> tuple[bool, list[dict[str, Any]]]:
        page = await _open(path, bob)
        for junk in ["not json", '{"after": "1"}', '{"after": -1}', "[1]", '{"after": 1.5}']:
            await page.send_to(text_data=junk)
        quiet = await page.receive_nothing(timeout=0.3)
        frames = await _ask(page, None)  # the socket still serves
        await page.disconnect()
        return quiet, frames

    quiet, frames = run_async(run())
    assert quiet
    assert [f["kind"] for f in frames] == ["caught_up"]
