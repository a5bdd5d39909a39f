"""Websockets: members receive their workspace's events; nobody else does."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from console.asgi import application
from jobs.live import broadcast

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
