"""Live sockets on the Redis channel layer: dead members are pruned, live ones keep receiving."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import override_settings
from redis import asyncio as aioredis

from console.asgi import application
from jobs.live import workspace_group

pytestmark = pytest.mark.django_db(transaction=True)

EVENT = {"type": "tidepool.events", "payloads": [{"name": "news"}]}


async def _open(path: str, user: Any) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://127.0.0.1")]
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _gets_nothing(layer: Any, channel: str) -> bool:
    try:
        await asyncio.wait_for(layer.receive(channel), 1)
    except TimeoutError:
        return True
    return False


def test_a_member_that_never_left_is_sent_nothing_ten_minutes_on(
    demo: Any, bob: Any, run_async: Any
) -> None:
    group = workspace_group(demo.workspaces["workspace_b"].pk)

    async def run() -> tuple[dict[str, Any], bool]:
        layer = get_channel_layer()
        gone = await layer.new_channel()
        await layer.group_add(group, gone)
        # It joined ten minutes ago, and its web process died before it could leave.
        client = aioredis.Redis.from_url(settings.REDIS_URL)
        await client.zadd(layer._group_key(group), {gone: time.time() - 600})
        await client.aclose()
        page = await _open(f"/ws/workspaces/{demo.workspaces['workspace_b'].pk}/", bob)
        await layer.group_send(group, EVENT)
        received = await page.receive_json_from(timeout=5)
        await page.disconnect()
        return received, await _gets_nothing(layer, gone)

    received, gone_got_nothing = run_async(run())
    assert received == {"name": "news"}
    assert gone_got_nothing


def test_a_live_page_stays_in_its_group_past_the_group_expiry(
    demo: Any, bob: Any, run_async: Any
) -> None:
    layers = {
        "default": {
            **settings.CHANNEL_LAYERS["default"],
            "CONFIG": {**settings.CHANNEL_LAYERS["default"]["CONFIG"], "group_expiry": 1},
        }
    }
    group = workspace_group(demo.workspaces["workspace_b"].pk)

    async def run() -> tuple[dict[str, Any], bool]:
        layer = get_channel_layer()
        gone = await layer.new_channel()
        await layer.group_add(group, gone)  # and never leaves
        page = await _open(f"/ws/workspaces/{demo.workspaces['workspace_b'].pk}/", bob)
        await asyncio.sleep(2.5)  # past the expiry (1 s, for the test)
        await layer.group_send(group, EVENT)
        received = await page.receive_json_from(timeout=5)
        await page.disconnect()
        return received, await _gets_nothing(layer, gone)

    with override_settings(CHANNEL_LAYERS=layers):
        received, gone_got_nothing = run_async(run())
    assert received == {"name": "news"}
    assert gone_got_nothing


def test_a_quiet_page_keeps_its_socket(demo: Any, bob: Any, run_async: Any) -> None:
    group = workspace_group(demo.workspaces["workspace_b"].pk)

    async def run() -> dict[str, Any]:
        page = await _open(f"/ws/workspaces/{demo.workspaces['workspace_b'].pk}/", bob)
        await asyncio.sleep(8)  # nothing to send for longer than Redis's 5 s blocking read
        await get_channel_layer().group_send(group, EVENT)
        received = await page.receive_json_from(timeout=5)
        await page.disconnect()
        return received

    assert run_async(run()) == {"name": "news"}
