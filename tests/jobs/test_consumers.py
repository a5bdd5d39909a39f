"""Websockets: members receive their workspace's events; nobody else does."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from console.asgi import application
from jobs.consumers import WorkspaceEventsConsumer, events_of
from jobs.live import Message, broadcast, broadcast_many, workspace_group

pytestmark = pytest.mark.django_db(transaction=True)


def _communicator(path: str, user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://127.0.0.1")]
    )
    communicator.scope["user"] = user
    return communicator


async def _connect(path: str, user) -> tuple[bool, WebsocketCommunicator]:
    communicator = _communicator(path, user)
    connected, _ = await communicator.connect()
    return connected, communicator


def test_anonymous_websocket_is_refused(demo, run_async) -> None:
    ws = demo.workspaces["workspace_b"]

    async def run() -> bool:
        connected, communicator = await _connect(f"/ws/workspaces/{ws.pk}/", AnonymousUser())
        await communicator.disconnect()
        return connected

    assert run_async(run()) is False


def test_bob_cannot_subscribe_to_workspace_c_and_never_gets_its_events(
    demo, bob, run_async
) -> None:
    ws_b, ws_c = demo.workspaces["workspace_b"], demo.workspaces["workspace_c"]

    async def run() -> tuple[bool, dict, bool]:
        refused, other = await _connect(f"/ws/workspaces/{ws_c.pk}/", bob)
        await other.disconnect()
        connected, mine = await _connect(f"/ws/workspaces/{ws_b.pk}/", bob)
        assert connected
        await database_sync_to_async(broadcast)(
            workspace_id=ws_c.pk, quota_id=None, payload={"name": "carol-secret"}
        )
        await database_sync_to_async(broadcast)(
            workspace_id=ws_b.pk, quota_id=None, payload={"name": "bob-job"}
        )
        received = await mine.receive_json_from(timeout=2)
        nothing_else = await mine.receive_nothing(timeout=0.3)
        await mine.disconnect()
        return refused, received, nothing_else

    refused, received, nothing_else = run_async(run())
    assert refused is False
    assert received == {"name": "bob-job"}
    assert nothing_else


def test_cluster_feed_is_for_platform_admins_only(demo, admin, bob, run_async) -> None:
    async def run() -> tuple[bool, bool]:
        as_admin, a = await _connect("/ws/cluster/", admin)
        as_bob, b = await _connect("/ws/cluster/", bob)
        await a.disconnect()
        await b.disconnect()
        return as_admin, as_bob

    assert run_async(run()) == (True, False)


def test_a_cycle_of_300_events_reaches_the_cluster_feed_whole_and_in_order(
    demo, admin, run_async
) -> None:
    # A channel holds 100 messages; a cycle's events travel as one message per group.
    ws = demo.workspaces["workspace_b"]
    sent = [Message(ws.pk, None, {"name": f"job-{i}"}) for i in range(300)]

    async def run() -> list[dict]:
        connected, feed = await _connect("/ws/cluster/", admin)
        assert connected
        await database_sync_to_async(broadcast_many)(sent)
        received: list[dict] = []
        while len(received) < 300:
            received += events_of(await feed.receive_json_from(timeout=5))
        await feed.disconnect()
        return received

    assert run_async(run()) == [m.payload for m in sent]


def test_a_browser_gone_before_its_disconnect_arrives_leaves_the_group(demo, bob, run_async):
    ws = demo.workspaces["workspace_b"]
    scope = {"type": "websocket", "user": bob, "url_route": {"kwargs": {"workspace_id": ws.pk}}}

    async def run() -> tuple[BaseException | None, dict]:
        incoming: asyncio.Queue[dict] = asyncio.Queue()
        await incoming.put({"type": "websocket.connect"})
        accepted = asyncio.Event()

        async def send(message: dict) -> None:
            if message["type"] != "websocket.accept":
                raise ConnectionResetError("the browser has gone")  # what servers raise
            accepted.set()

        consumer = asyncio.create_task(WorkspaceEventsConsumer.as_asgi()(scope, incoming.get, send))
        await asyncio.wait_for(accepted.wait(), 5)
        await database_sync_to_async(broadcast)(
            workspace_id=ws.pk, quota_id=None, payload={"name": "after-leaving"}
        )
        await asyncio.wait([consumer], timeout=5)
        members = dict(get_channel_layer().groups.get(workspace_group(ws.pk), {}))
        if not consumer.done():
            consumer.cancel()
        return consumer.exception() if consumer.done() else None, members

    error, members = run_async(run())
    assert members == {}
    assert error is None


def test_open_sockets_are_counted_and_a_refused_one_is_not(demo, bob, run_async) -> None:
    from prometheus_client import REGISTRY

    def open_sockets() -> float:
        return REGISTRY.get_sample_value("tidepool_websocket_connections") or 0.0

    ws_b, ws_c = demo.workspaces["workspace_b"], demo.workspaces["workspace_c"]
    before = open_sockets()

    async def run() -> tuple[float, float]:
        refused, other = await _connect(f"/ws/workspaces/{ws_c.pk}/", bob)
        assert not refused
        await other.disconnect()
        connected, mine = await _connect(f"/ws/workspaces/{ws_b.pk}/", bob)
        assert connected
        during = open_sockets()
        await mine.disconnect()
        await asyncio.sleep(0.05)
        return during, open_sockets()

    during, after = run_async(run())
    assert (during, after) == (before + 1, before)
