"""Workspace services: roles map to object permissions; usage rules are saved all or nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from guardian.shortcuts import get_perms

from console.demo import Demo
from console.errors import DomainError
from workspaces.access import Access, strictest
from workspaces.choices import Role
from workspaces.models import Membership, ResourceUsageRule
from workspaces.services import (
    UsageRuleInput,
    resource_usage_rules_save,
    workspace_create,
    workspace_member_add,
    workspace_member_remove,
    workspace_quota_bind,
    workspace_quota_unbind,
)


@pytest.fixture
def dave(db: None):
    return get_user_model().objects.create_user("dave")


@pytest.mark.parametrize(
    ("role", "perms"),
    [
        (Role.ADMIN, {"view_workspace", "submit_workspace", "manage_workspace"}),
        (Role.DEVELOPER, {"view_workspace", "submit_workspace"}),
        (Role.OPERATOR, {"view_workspace", "submit_workspace"}),
        (Role.VIEWER, {"view_workspace"}),
    ],
    ids=["admin", "developer", "operator", "viewer"],
)
def test_role_grants_exactly_its_permissions(demo: Demo, dave, role: str, perms: set[str]) -> None:
    ws = demo.workspaces["workspace_b"]
    workspace_member_add(workspace=ws, user=dave, role=role)
    assert set(get_perms(dave, ws)) == perms
    assert list(Access(dave).workspaces()) == [ws]


def test_changing_role_swaps_permissions(demo: Demo, dave) -> None:
    ws = demo.workspaces["workspace_b"]
    workspace_member_add(workspace=ws, user=dave, role=Role.ADMIN)
    workspace_member_add(workspace=ws, user=dave, role=Role.VIEWER)
    assert set(get_perms(dave, ws)) == {"view_workspace"}
    assert Membership.objects.get(workspace=ws, user=dave).role == Role.VIEWER


def test_removing_member_drops_every_permission(demo: Demo, bob) -> None:
    ws = demo.workspaces["workspace_b"]
    workspace_member_remove(workspace=ws, user=bob)
    assert get_perms(bob, ws) == []
    assert list(Access(bob).workspaces()) == []


def test_unknown_role_is_refused(demo: Demo, dave) -> None:
    with pytest.raises(DomainError, match="Role 'owner' is not one of") as caught:
        workspace_member_add(workspace=demo.workspaces["workspace_b"], user=dave, role="owner")
    assert caught.value.field == "role"


def test_member_sees_only_own_workspace(demo: Demo, alice, bob, carol, admin) -> None:
    assert [w.name for w in Access(alice).workspaces()] == ["workspace_a"]
    assert [w.name for w in Access(bob).workspaces()] == ["workspace_b"]
    assert [w.name for w in Access(carol).workspaces()] == ["workspace_c"]
    assert len(Access(admin).workspaces()) == 3


@pytest.mark.parametrize(
    ("name", "message"),
    [("", "needs a name"), ("two words", "only letters"), ("new", "reserved"),
     ("workspace_a", "already exists")],
    ids=["empty", "not-slug", "reserved", "duplicate"],
)  # fmt: skip
def test_workspace_create_refuses_bad_names(demo: Demo, name: str, message: str) -> None:
    with pytest.raises(DomainError, match=message):
        workspace_create(name=name)


def test_unbind_drops_the_quota_rules(demo: Demo) -> None:
    ws, q = demo.workspaces["workspace_b"], demo.quotas["Quota 1.1"]
    workspace_quota_unbind(workspace=ws, quota=q)
    assert not ResourceUsageRule.objects.filter(workspace=ws).exists()
    assert list(ws.quotas.all()) == []


def test_rules_save_replaces_the_whole_set(demo: Demo) -> None:
    ws, q = demo.workspaces["workspace_b"], demo.quotas["Quota 1.1"]
    resource_usage_rules_save(
        workspace=ws,
        rules=[
            UsageRuleInput(q, Role.DEVELOPER, max_gpus=16_000, max_priority=5),
            UsageRuleInput(q, Role.VIEWER, max_gpus=500),
        ],
    )
    rows = ResourceUsageRule.objects.filter(workspace=ws)
    assert sorted(rows.values_list("role", "max_gpus", "max_priority")) == [
        ("developer", 16_000, 5),
        ("viewer", 500, None),
    ]


def _rules(demo: Demo) -> list[tuple[str, int | None, int | None]]:
    return sorted(
        ResourceUsageRule.objects.filter(workspace=demo.workspaces["workspace_b"]).values_list(
            "role", "max_gpus", "max_priority"
        )
    )


@pytest.mark.parametrize(
    ("rule", "field", "message"),
    [
        ({"role": "owner"}, "role", "Rule 2: role 'owner' is not one of"),
        ({"max_priority": 10}, "max_priority", "Rule 2: max priority must be between 1 and 9"),
        ({"max_priority": 0}, "max_priority", "Rule 2: max priority must be between 1 and 9"),
        ({"max_gpus": -1000}, "max_gpus", "Rule 2: max GPUs must be 0 or more, not -1"),
        ({"quota": "Quota 1"}, "quota", "Rule 2: quota Quota 1 is not bound to workspace"),
        ({"role": Role.ADMIN}, "role", "Rule 2: role admin already has a rule for Quota 1.1"),
    ],
    ids=["bad-role", "priority-too-high", "priority-zero", "negative-gpus", "unbound-quota",
         "duplicate"],
)  # fmt: skip
def test_rules_save_refuses_bad_rule_and_keeps_old_set(
    demo: Demo, rule: dict, field: str, message: str
) -> None:
    before = _rules(demo)
    q = demo.quotas[rule.pop("quota", "Quota 1.1")]
    bad = UsageRuleInput(q, **{"role": Role.VIEWER, **rule})
    with pytest.raises(DomainError) as caught:
        resource_usage_rules_save(
            workspace=demo.workspaces["workspace_b"],
            rules=[UsageRuleInput(demo.quotas["Quota 1.1"], Role.ADMIN, max_gpus=1000), bad],
        )
    assert caught.value.field == field
    assert caught.value.message.startswith(message)
    assert _rules(demo) == before == [("admin", None, None), ("developer", None, None)]


def test_single_rule_set_checks_caps(demo: Demo) -> None:
    from workspaces.services import resource_usage_rule_set

    with pytest.raises(DomainError, match="Max GPUs must be 0 or more") as caught:
        resource_usage_rule_set(
            workspace=demo.workspaces["workspace_b"],
            quota=demo.quotas["Quota 1.1"],
            role=Role.VIEWER,
            max_gpus=-1,
        )
    assert caught.value.field == "max_gpus"


@pytest.mark.parametrize(
    ("caps", "expected"),
    [([None, None], None), ([8000, None], 8000), ([8000, 4000, None], 4000), ([], None)],
    ids=["no-caps", "one-cap", "smallest", "no-rules"],
)
def test_strictest_cap_wins(caps: list[int | None], expected: int | None) -> None:
    assert strictest(caps) == expected


def test_usable_quotas_follow_the_role_rules(demo: Demo, bob, dave) -> None:
    ws, q = demo.workspaces["workspace_b"], demo.quotas["Quota 1.1"]
    resource_usage_rules_save(
        workspace=ws,
        rules=[
            UsageRuleInput(q, Role.DEVELOPER, max_gpus=8000, max_priority=7),
            UsageRuleInput(q, Role.ADMIN),
        ],
    )
    [usable] = Access(bob).usable_quotas(ws)
    assert (usable.quota, usable.max_gpus, usable.max_priority) == (q, 8000, 7)
    workspace_member_add(workspace=ws, user=dave, role=Role.VIEWER)
    assert Access(dave).usable_quotas(ws) == []
    workspace_member_add(workspace=ws, user=dave, role=Role.ADMIN)
    assert [(u.max_gpus, u.max_priority) for u in Access(dave).usable_quotas(ws)] == [(None, None)]


def test_usable_quotas_strictest_cap_of_quota_and_bound_ancestor_wins(demo: Demo, bob) -> None:
    ws = demo.workspaces["workspace_b"]
    parent, child = demo.quotas["Quota 1"], demo.quotas["Quota 1.1"]
    workspace_quota_bind(workspace=ws, quota=parent)
    resource_usage_rules_save(
        workspace=ws,
        rules=[
            UsageRuleInput(parent, Role.DEVELOPER, max_gpus=4000),
            UsageRuleInput(child, Role.DEVELOPER, max_gpus=8000, max_priority=5),
            UsageRuleInput(child, Role.ADMIN, max_gpus=1000, max_priority=1),
        ],
    )
    caps = {u.quota.name: (u.max_gpus, u.max_priority) for u in Access(bob).usable_quotas(ws)}
    assert caps == {"Quota 1": (4000, None), "Quota 1.1": (4000, 5)}


def test_usable_quotas_ignore_other_workspaces_and_unbound(demo: Demo, bob) -> None:
    assert Access(bob).usable_quotas(demo.workspaces["workspace_c"]) == []
    ws = demo.workspaces["workspace_b"]
    workspace_quota_bind(workspace=ws, quota=demo.quotas["Quota 1.2"])
    assert [u.quota.name for u in Access(bob).usable_quotas(ws)] == ["Quota 1.1"]
