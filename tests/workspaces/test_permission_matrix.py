"""Every workspace page × admin, alice, bob, carol and anonymous.

A member sees their workspace; an outsider gets 404 for it (never 403); a member who can see
it but lacks the permission gets 403; anonymous users are sent to the login page.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from console.demo import Demo
from workspaces.models import Membership, Workspace

PERSONAS = ["admin", "alice", "bob", "carol", None]
OWNER = {"workspace_a": "alice", "workspace_b": "bob", "workspace_c": "carol"}
QUOTA = {"workspace_a": "Quota 1", "workspace_b": "Quota 1.1", "workspace_c": "Quota 1.2"}

# page name -> (method, status for the platform admin, for the member (developer), for an outsider)
WORKSPACE_PAGES: dict[str, tuple[str, int, int, int]] = {
    "detail": ("get", 200, 200, 404),
    "scheduling": ("get", 302, 302, 404),
    "resource_usage": ("get", 200, 200, 404),
    "resource_usage_save": ("post", 302, 403, 404),
    "time_limits": ("get", 200, 200, 404),
    "time_limits_save": ("post", 302, 403, 404),
    "member_add": ("post", 302, 403, 404),
    "member_remove": ("post", 302, 403, 404),
    "quota_bind": ("post", 302, 403, 404),
    "quota_unbind": ("post", 302, 403, 404),
}


def _cases() -> list[Any]:
    cases = []
    for page, (method, admin_status, member_status, outsider_status) in WORKSPACE_PAGES.items():
        for ws, owner in OWNER.items():
            for persona in PERSONAS:
                if persona is None:
                    expected = "login"
                elif persona == "admin":
                    expected = admin_status
                elif persona == owner:
                    expected = member_status
                else:
                    expected = outsider_status
                cases.append(
                    pytest.param(page, method, ws, persona, expected,
                                 id=f"{page}-{ws}-{persona or 'anonymous'}")
                )  # fmt: skip
    return cases


def _request(demo: Demo, page: str, ws: str) -> tuple[str, dict[str, Any]]:
    owner = get_user_model().objects.get(username=OWNER[ws])
    quota = demo.quotas[QUOTA[ws]]
    urls = {
        "detail": (reverse("workspaces:detail", args=[ws]), {}),
        "scheduling": (reverse("workspaces:scheduling", args=[ws]), {}),
        "resource_usage": (reverse("workspaces:resource_usage", args=[ws]), {}),
        "resource_usage_save": (
            reverse("workspaces:resource_usage", args=[ws]),
            {"quota": [str(quota.pk)], "role": ["viewer"], "max_gpus": ["1"], "max_priority": [""]},
        ),
        "time_limits": (reverse("workspaces:time_limits", args=[ws]), {}),
        "time_limits_save": (
            reverse("workspaces:time_limits", args=[ws]),
            {"default_hours": "2", "max_hours": "8"},
        ),
        "member_add": (
            reverse("workspaces:member_add", args=[ws]),
            {"username": "admin", "role": "viewer"},
        ),
        "member_remove": (
            reverse("workspaces:member_remove", args=[ws, owner.pk]),
            {"confirm": "1"},
        ),
        "quota_bind": (
            reverse("workspaces:quota_bind", args=[ws]),
            {"quota": str(demo.quotas["Quota 1.2"].pk)},
        ),
        "quota_unbind": (
            reverse("workspaces:quota_unbind", args=[ws, quota.pk]),
            {"confirm": "1"},
        ),
    }
    return urls[page]


@pytest.mark.parametrize(("page", "method", "ws", "persona", "expected"), _cases())
def test_workspace_page_access(
    demo: Demo, login: Any, page: str, method: str, ws: str, persona: str | None, expected: Any
) -> None:
    user = get_user_model().objects.get(username=persona) if persona else None
    client = login(user)
    url, data = _request(demo, page, ws)
    response = getattr(client, method)(url, data)
    if expected == "login":
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login") + "?next=")
        return
    assert response.status_code == expected
    if expected in (403, 404) and page == "member_remove":
        assert Membership.objects.filter(workspace__name=ws, user__username=OWNER[ws]).exists()
    if page == "time_limits_save":
        saved = Workspace.objects.get(name=ws)
        limits = (saved.instance_default_duration, saved.instance_max_duration)
        assert limits == ((7200, 28800) if expected == 302 else (None, None))


@pytest.mark.parametrize(
    ("page", "persona", "expected"),
    [
        pytest.param(page, persona, expected, id=f"{page}-{persona or 'anonymous'}")
        for page, statuses in {
            "list": {"admin": 200, "alice": 200, "bob": 200, "carol": 200, None: "login"},
            "create": {"admin": 200, "alice": 404, "bob": 404, "carol": 404, None: "login"},
        }.items()
        for persona, expected in statuses.items()
    ],
)
def test_workspace_index_pages_access(
    demo: Demo, login: Any, page: str, persona: str | None, expected: Any
) -> None:
    user = get_user_model().objects.get(username=persona) if persona else None
    response = login(user).get(reverse(f"workspaces:{page}"))
    if expected == "login":
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    else:
        assert response.status_code == expected


def test_unknown_workspace_is_404_even_for_admin(demo: Demo, login: Any, admin: Any) -> None:
    assert login(admin).get(reverse("workspaces:detail", args=["nope"])).status_code == 404
