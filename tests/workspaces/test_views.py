"""Workspace pages: members, quotas and the Resource Usage tab."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from console.demo import Demo
from workspaces.choices import Role
from workspaces.models import Membership, ResourceUsageRule, Workspace
from workspaces.services import workspace_member_add


def _rules(ws: str) -> list[tuple[str, str, int | None, int | None]]:
    return sorted(
        ResourceUsageRule.objects.filter(workspace__name=ws).values_list(
            "quota__name", "role", "max_gpus", "max_priority"
        )
    )


def test_detail_shows_members_and_quota_gpus(demo: Demo, login: Any, bob: Any) -> None:
    body = login(bob).get(reverse("workspaces:detail", args=["workspace_b"])).content.decode()
    assert 'data-member="bob"' in body
    assert '<tr data-quota="Quota 1.1">' in body
    assert '<td class="num" data-testid="gpus">48</td>' in body
    assert "Add member" not in body  # a developer cannot manage members


def test_save_rules_posts_rows_in_one_go(demo: Demo, login: Any, admin: Any) -> None:
    q = demo.quotas["Quota 1.1"].pk
    url = reverse("workspaces:resource_usage", args=["workspace_b"])
    response = login(admin).post(
        url,
        {
            "quota": [q, q, q],
            "role": ["admin", "developer", "viewer"],
            "max_gpus": ["", "16", "0.5"],
            "max_priority": ["", "7", ""],
        },
    )
    assert response.status_code == 302
    assert _rules("workspace_b") == [
        ("Quota 1.1", "admin", None, None),
        ("Quota 1.1", "developer", 16000, 7),
        ("Quota 1.1", "viewer", 500, None),
    ]
    body = login(admin).get(url).content.decode()
    assert 'value="0.5"' in body


@pytest.mark.parametrize(
    ("max_gpus", "max_priority", "message"),
    [
        ("eight", "", "Rule 2: max GPUs: &#x27;eight&#x27; is not a number of GPUs."),
        ("0.0001", "", "Rule 2: max GPUs: 0.0001 GPUs is finer than 1/1000 of a GPU."),
        ("-2", "", "Rule 2: max GPUs: -2 is not a valid number of GPUs"),
        ("", "12", "Rule 2: max priority must be between 1 and 9, not 12."),
        ("", "high", "Rule 2: max priority &#x27;high&#x27; is not a whole number 1-9."),
    ],
    ids=["not-a-number", "too-fine", "negative", "priority-range", "priority-not-number"],
)
def test_save_refuses_bad_row_and_keeps_everything(
    demo: Demo, login: Any, admin: Any, max_gpus: str, max_priority: str, message: str
) -> None:
    before = _rules("workspace_b")
    q = demo.quotas["Quota 1.1"].pk
    response = login(admin).post(
        reverse("workspaces:resource_usage", args=["workspace_b"]),
        {
            "quota": [q, q],
            "role": ["viewer", "operator"],
            "max_gpus": ["8", max_gpus],
            "max_priority": ["", max_priority],
        },
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert message in body and "Nothing was saved." in body
    assert 'value="8"' in body  # the rows typed are shown back
    assert _rules("workspace_b") == before


def test_quota_of_another_workspace_is_refused(demo: Demo, login: Any, admin: Any) -> None:
    response = login(admin).post(
        reverse("workspaces:resource_usage", args=["workspace_b"]),
        {"quota": [demo.quotas["Quota 1.2"].pk], "role": ["viewer"]},
    )
    assert response.status_code == 400
    assert "Rule 1: choose one of the workspace&#x27;s quotas." in response.content.decode()


def test_workspace_admin_manages_members_and_rules(demo: Demo, login: Any, bob: Any) -> None:
    ws = demo.workspaces["workspace_b"]
    workspace_member_add(workspace=ws, user=bob, role=Role.ADMIN)
    client = login(bob)
    body = client.get(reverse("workspaces:detail", args=["workspace_b"])).content.decode()
    assert "Add member" in body and "Bind quota" not in body
    client.post(
        reverse("workspaces:member_add", args=["workspace_b"]),
        {"username": "carol", "role": "viewer"},
    )
    carol = get_user_model().objects.get(username="carol")
    assert Membership.objects.get(workspace=ws, user=carol).role == "viewer"
    assert carol.has_perm("workspaces.view_workspace", ws)
    response = client.post(
        reverse("workspaces:resource_usage", args=["workspace_b"]),
        {"quota": [demo.quotas["Quota 1.1"].pk], "role": ["viewer"], "max_gpus": ["2"]},
    )
    assert response.status_code == 302
    client.post(
        reverse("workspaces:member_remove", args=["workspace_b", carol.pk]), {"confirm": "1"}
    )
    assert not Membership.objects.filter(workspace=ws, user=carol).exists()
    assert not carol.has_perm("workspaces.view_workspace", ws)
    # a workspace admin is not a platform admin: binding quotas stays refused
    bind = client.post(
        reverse("workspaces:quota_bind", args=["workspace_b"]),
        {"quota": demo.quotas["Quota 1.2"].pk},
    )
    assert bind.status_code == 403


def test_viewer_sees_rules_read_only_and_cannot_save(demo: Demo, login: Any, carol: Any) -> None:
    ws = demo.workspaces["workspace_b"]
    workspace_member_add(workspace=ws, user=carol, role=Role.VIEWER)
    client = login(carol)
    url = reverse("workspaces:resource_usage", args=["workspace_b"])
    body = client.get(url).content.decode()
    assert "Quota 1.1" in body and "+ Add" not in body and "Save" not in body
    assert client.post(url, {"quota": [], "role": []}).status_code == 403
    assert len(_rules("workspace_b")) == 2


def test_unknown_member_is_reported(demo: Demo, login: Any, admin: Any) -> None:
    response = login(admin).post(
        reverse("workspaces:member_add", args=["workspace_b"]),
        {"username": "mallory", "role": "viewer"},
        follow=True,
    )
    page = response.content.decode()
    assert "No user named &#x27;mallory&#x27;." in page
    assert "username:" not in page  # a notice never shows a field's code


def test_admin_creates_binds_and_unbinds(demo: Demo, login: Any, admin: Any) -> None:
    client = login(admin)
    response = client.post(reverse("workspaces:create"), {"name": "team-d", "description": "D"})
    assert response["Location"] == reverse("workspaces:detail", args=["team-d"])
    q = demo.quotas["Quota 1.2"]
    client.post(reverse("workspaces:quota_bind", args=["team-d"]), {"quota": q.pk})
    ws = Workspace.objects.get(name="team-d")
    assert list(ws.quotas.all()) == [q]
    client.post(reverse("workspaces:quota_unbind", args=["team-d", q.pk]), {"confirm": "1"})
    assert list(ws.quotas.all()) == []
    again = client.post(reverse("workspaces:create"), {"name": "team-d"})
    assert "A workspace named team-d already exists." in again.content.decode()


def test_list_shows_only_own_workspaces(
    demo: Demo, login: Any, bob: Any, django_assert_max_num_queries: Any
) -> None:
    client = login(bob)
    with django_assert_max_num_queries(8):
        body = client.get(reverse("workspaces:list")).content.decode()
    assert 'data-workspace="workspace_b"' in body
    assert "workspace_a" not in body and "workspace_c" not in body
