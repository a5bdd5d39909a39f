"""Pages, the API and the websocket let in exactly whom Access lets view the workspace."""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.test import Client
from guardian.shortcuts import assign_perm
from rest_framework.test import APIClient

from console.asgi import application
from console.demo import Demo
from workspaces.access import Access
from workspaces.roles import VIEW

pytestmark = pytest.mark.django_db(transaction=True)

GRANTS = ["outsider", "member", "group", "global", "platform_admin"]


def _grant(demo: Demo, grant: str) -> Any:
    """A fresh user holding `grant` on workspace_b (or on every workspace)."""
    dave = get_user_model().objects.create_user("dave")
    ws = demo.workspaces["workspace_b"]
    if grant == "member":
        assign_perm(VIEW, dave, ws)
    if grant == "group":
        team = Group.objects.create(name="team")
        team.user_set.add(dave)
        assign_perm(VIEW, team, ws)
    if grant == "global":
        assign_perm(VIEW, dave)
    if grant == "platform_admin":
        dave.user_permissions.add(Permission.objects.get(codename="manage_cluster"))
    return get_user_model().objects.get(pk=dave.pk)


@pytest.mark.parametrize("grant", GRANTS)
def test_every_surface_lets_in_whom_access_lets_view(demo: Demo, run_async: Any, grant: str):
    user = _grant(demo, grant)
    ws = demo.workspaces["workspace_b"]
    may = Access(user).has_perm(VIEW, ws)
    assert may == (grant != "outsider")

    page = Client()
    page.force_login(user)
    api = APIClient()
    api.force_authenticate(user)

    async def socket() -> bool:
        communicator = WebsocketCommunicator(
            application,
            f"/ws/workspaces/{ws.pk}/",
            headers=[(b"origin", b"http://127.0.0.1")],
        )
        communicator.scope["user"] = user
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return bool(connected)

    answers = {
        "page": page.get(f"/workspaces/{ws.name}/").status_code,
        "jobs page": page.get(f"/workspaces/{ws.name}/jobs/").status_code,
        "api": api.get(f"/api/v1/workspaces/{ws.pk}/").status_code,
        "socket": run_async(socket()),
    }
    want = {"page": 200, "jobs page": 200, "api": 200, "socket": True}
    if not may:
        want = {"page": 404, "jobs page": 404, "api": 404, "socket": False}
    assert answers == want


def test_the_socket_refuses_a_workspace_that_does_not_exist(demo: Demo, admin: Any, run_async):
    async def socket() -> bool:
        communicator = WebsocketCommunicator(
            application, "/ws/workspaces/999999/", headers=[(b"origin", b"http://127.0.0.1")]
        )
        communicator.scope["user"] = admin
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return bool(connected)

    assert run_async(socket()) is False
