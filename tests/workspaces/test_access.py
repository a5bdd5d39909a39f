"""Access answers as guardian does: direct or group grants, global permissions, platform admins."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from guardian.core import ObjectPermissionChecker
from guardian.shortcuts import assign_perm, get_objects_for_user
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from console.permissions import PLATFORM_ADMIN_PERM, is_platform_admin
from workspaces.access import Access
from workspaces.models import Workspace
from workspaces.roles import MANAGE, SUBMIT, VIEW

PERMS = (VIEW, SUBMIT, MANAGE)
WORKSPACES = 3


def guardian_holds(user: Any, perm: str, workspace: Workspace) -> bool:
    """guardian's checker on the object, or the permission held globally, or a platform admin."""
    checker = ObjectPermissionChecker(user)
    return checker.has_perm(perm, workspace) or user.has_perm(perm) or is_platform_admin(user)


def guardian_lists(user: Any, workspaces: list[Workspace]) -> set[int]:
    """The workspaces get_objects_for_user lists for VIEW (every one for platform admins).

    guardian lists an inactive user's object grants; Django signs no inactive user in, and
    Access (as guardian's checker) gives them nothing.
    """
    if not user.is_active:
        return set()
    if is_platform_admin(user):
        return {w.pk for w in workspaces}
    listed = get_objects_for_user(user, VIEW, klass=Workspace, accept_global_perms=True)
    return set(listed.values_list("pk", flat=True))


def assert_access_is_guardians(user: Any, workspaces: list[Workspace]) -> None:
    """Every answer of a fresh Access equals guardian's for this user."""
    user = get_user_model().objects.get(pk=user.pk)  # no permissions cached
    access = Access(user)
    for workspace in workspaces:
        for perm in PERMS:
            want = guardian_holds(user, perm, workspace)
            assert access.has_perm(perm, workspace) == want, (perm, workspace.name)
    ids = access.visible_ids()
    seen = {w.pk for w in workspaces} if ids is None else set(ids)
    assert seen == guardian_lists(user, workspaces)
    assert set(access.workspaces().values_list("pk", flat=True)) == seen


@pytest.fixture
def workspaces(db: None) -> list[Workspace]:
    return [Workspace.objects.create(name=f"ws-{i}") for i in range(WORKSPACES)]


subjects = st.tuples(st.sampled_from(["user", "group"]), st.integers(0, 2))
object_grants = st.lists(
    st.tuples(subjects, st.sampled_from(PERMS), st.integers(0, WORKSPACES - 1)), max_size=8
)
global_grants = st.lists(
    st.tuples(subjects, st.sampled_from([*PERMS, PLATFORM_ADMIN_PERM])), max_size=3
)
users = st.lists(
    st.tuples(st.booleans(), st.booleans()).map(
        lambda f: {"is_active": f[0] or f[1], "is_superuser": f[0] and f[1]}
    ),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    flags=users,
    groups=st.integers(0, 3),
    memberships=st.sets(st.tuples(st.integers(0, 2), st.integers(0, 2)), max_size=5),
    grants=object_grants,
    globals_=global_grants,
)
def test_access_answers_as_guardian_for_random_grants(
    workspaces: list[Workspace],
    flags: list[dict[str, bool]],
    groups: int,
    memberships: set[tuple[int, int]],
    grants: list[tuple[tuple[str, int], str, int]],
    globals_: list[tuple[tuple[str, int], str]],
) -> None:
    """Direct, group, global and platform-admin grants, on active, inactive and superusers."""
    with transaction.atomic():
        made = [get_user_model().objects.create_user(f"u{i}", **f) for i, f in enumerate(flags)]
        teams = [Group.objects.create(name=f"g{i}") for i in range(groups)]

        def subject(kind: str, index: int) -> Any:
            pool: list[Any] = made if kind == "user" else teams
            return pool[index % len(pool)] if pool else None

        for u, g in memberships:
            if teams:
                teams[g % len(teams)].user_set.add(made[u % len(made)])
        for (kind, index), perm, w in grants:
            if (holder := subject(kind, index)) is not None:
                assign_perm(perm, holder, workspaces[w])
                event(f"{kind} object grant")
        for (kind, index), perm in globals_:
            if (holder := subject(kind, index)) is not None:
                app, codename = perm.split(".")
                granted = Permission.objects.get(content_type__app_label=app, codename=codename)
                (holder.user_permissions if kind == "user" else holder.permissions).add(granted)
                event("platform admin" if perm == PLATFORM_ADMIN_PERM else f"{kind} global")
        for user in made:
            assert_access_is_guardians(user, workspaces)
        transaction.set_rollback(True)


@pytest.mark.parametrize(
    "grant",
    [
        "none",
        "direct",
        "submit_only",
        "group",
        "both",
        "global",
        "global_via_group",
        "platform_admin",
        "superuser",
        "inactive",
    ],
)
def test_access_answers_as_guardian_for_each_kind_of_grant(
    workspaces: list[Workspace], grant: str
) -> None:
    """The cases the random test draws, each named once."""
    dave = get_user_model().objects.create_user("dave")
    ws, other = workspaces[0], workspaces[1]
    if grant in {"direct", "both", "inactive"}:
        assign_perm(SUBMIT, dave, ws)
        assign_perm(VIEW, dave, ws)
    if grant == "submit_only":
        assign_perm(SUBMIT, dave, other)
    if grant in {"group", "both", "global_via_group"}:
        team = Group.objects.create(name="team")
        team.user_set.add(dave)
        assign_perm(VIEW, team, other)
        if grant == "global_via_group":
            team.permissions.add(Permission.objects.get(codename="manage_workspace"))
    if grant == "global":
        assign_perm(VIEW, dave)
    if grant == "platform_admin":
        dave.user_permissions.add(Permission.objects.get(codename="manage_cluster"))
    dave.is_active = grant != "inactive"
    dave.is_superuser = grant == "superuser"
    dave.save()
    assert_access_is_guardians(dave, workspaces)


def test_anonymous_users_hold_nothing(workspaces: list[Workspace]) -> None:
    access = Access(AnonymousUser())
    assert not any(access.has_perm(p, w) for p in PERMS for w in workspaces)
    assert access.visible_ids() == []
    assert access.usable_quotas(workspaces[0]) == []


def test_access_reads_the_grants_once_for_every_answer(workspaces: list[Workspace]) -> None:
    dave = get_user_model().objects.create_user("dave")
    for workspace in workspaces[:2]:
        assign_perm(VIEW, dave, workspace)
    access = Access(get_user_model().objects.get(pk=dave.pk))
    with CaptureQueriesContext(connection) as queries:
        for _ in range(3):
            access.visible_ids()
            for workspace in workspaces:
                for perm in PERMS:
                    access.has_perm(perm, workspace)
    grants = [q for q in queries.captured_queries if "guardian_" in q["sql"]]
    assert len(grants) == 1
    # Plus Django's two reads of the global permissions (own, groups'), cached on the user.
    assert len(queries) <= 3
