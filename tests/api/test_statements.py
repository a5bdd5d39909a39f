"""Reads compiled once (console.fast.statements) answer what the ORM answers, for any values."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from console import clock
from console.fast.statements import ROWS, Statement
from jobs.choices import Kind, Status
from jobs.models import Workload
from quotas.models import Quota

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_paths(settings: Any) -> None:
    """These tests are of the compiled path itself, whichever way the suite runs."""
    settings.TIDEPOOL_FAST_PATHS = True


def _seed(demo: Any, bob: Any, carol: Any) -> None:
    """Jobs in two workspaces and quotas, by two owners."""
    now = clock.now()
    places = [
        (demo.workspaces["workspace_b"], demo.quotas["Quota 1.1"], bob),
        (demo.workspaces["workspace_c"], demo.quotas["Quota 1.2"], carol),
    ]
    Workload.objects.bulk_create(
        Workload(
            workspace=ws,
            quota=quota,
            owner=owner,
            name=f"s{i}",
            kind=Kind.TRAINING,
            status=(Status.SUCCEEDED, Status.FAILED, Status.QUEUED)[i % 3],
            gpu=1000,
            submitted_at=now,
        )
        for i in range(30)
        for ws, quota, owner in [places[i % 2]]
    )


def _jobs(shape: tuple[str, ...], *values: Any) -> Any:
    """Jobs matching each lookup in `shape` with the value in its place."""
    lookups = dict(zip(shape, values, strict=True))
    return Workload.objects.filter(**lookups).order_by("name").values("name", "quota__name")


def _orm(shape: tuple[str, ...], *values: Any, low: int = 0, high: int | None = None) -> Any:
    return list(_jobs(shape, *values)[low:high])


QUERIES = [
    (("workspace__name",), ("workspace_b",)),
    (("workspace__name",), ("workspace_c",)),
    (("workspace__name",), ("nowhere",)),
    (("workspace__name", "status"), ("workspace_c", Status.FAILED)),
    (("workspace__name", "status"), ("workspace_b", Status.QUEUED)),
    (("owner__username",), ("carol",)),
    (("name__icontains",), ("S1",)),  # the value reaches SQL as %S1%: compiled each time
    (("name__icontains",), ("2",)),
]


def test_rows_match_the_orm_for_every_value_and_slice(demo: Any, bob: Any, carol: Any) -> None:
    _seed(demo, bob, carol)
    statement = Statement(_jobs)
    for shape, values in QUERIES:
        for low, high in [(0, None), (0, 4), (3, 9), (20, 40)]:
            got = statement.rows(*values, shape=shape, low=low, high=high)
            assert got == _orm(shape, *values, low=low, high=high), (shape, values, low, high)


def test_a_quota_named_by_digits_or_by_id_finds_its_jobs(demo: Any, bob: Any, carol: Any) -> None:
    """Digits may reach SQL as text and as a number: both places take the new value."""
    _seed(demo, bob, carol)
    named = Quota.objects.filter(name="Quota 1.2").update(name="12")
    assert named == 1

    def by_quota(shape: tuple[str, ...], quota: str) -> Any:
        jobs = Workload.objects.filter(quota__name=quota) | Workload.objects.filter(quota_id=quota)
        return jobs.order_by("name").values("name")

    statement = Statement(by_quota)
    for quota in ["12", str(demo.quotas["Quota 1.1"].pk), "999", "12"]:
        expected = list(by_quota((), quota))
        assert statement.rows(quota, shape=()) == expected, quota
    assert statement.rows("12", shape=())  # the renamed quota's jobs are found by name


def test_a_value_shown_inline_is_compiled_for_each_call(demo: Any, bob: Any, carol: Any) -> None:
    _seed(demo, bob, carol)
    statement = Statement(lambda shape, n: Workload.objects.order_by("name").values("name")[:n])
    assert len(statement.rows(2, shape=())) == 2
    assert len(statement.rows(5, shape=())) == 5


def test_count_counts_the_filtered_rows(demo: Any, bob: Any, carol: Any) -> None:
    _seed(demo, bob, carol)
    statement = Statement(
        lambda shape, ws: _jobs(("workspace__name",), ws).order_by().values(n=ROWS)
    )
    for ws in ["workspace_b", "workspace_c", "nowhere"]:
        expected = Workload.objects.filter(workspace__name=ws).count()
        assert statement.rows(ws, shape=()) == [{"n": expected}]


@pytest.mark.django_db(transaction=True)
def test_a_new_connection_reuses_the_sql_compiled_on_another(
    demo: Any, bob: Any, carol: Any
) -> None:
    """A request on a new thread (its own connection, as under Django's ASGI handler) reads
    the same rows without compiling again."""
    _seed(demo, bob, carol)
    built: list[Any] = []

    def counted(shape: tuple[str, ...], *values: Any) -> Any:
        built.append(values)
        return _jobs(shape, *values)

    statement = Statement(counted)
    shape = ("workspace__name",)
    mine = statement.rows("workspace_b", shape=shape)
    assert len(built) == 2  # the real values and the stand-ins
    theirs: list[Any] = []

    def read() -> None:
        try:
            theirs.extend(statement.rows("workspace_b", shape=shape))
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    assert mine == theirs == _orm(shape, "workspace_b")
    assert len(built) == 2


@pytest.mark.django_db(transaction=True)
def test_a_finished_threads_connection_is_not_kept_alive(demo: Any) -> None:
    """Servers that run each request on a new thread must not leak its connection."""
    statement = Statement(_jobs)
    wrappers: list[weakref.ref[Any]] = []

    def read() -> None:
        try:
            statement.rows("workspace_b", shape=("workspace__name",))
            wrappers.append(weakref.ref(connections["default"]))
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    del thread
    gc.collect()
    assert wrappers and wrappers[0]() is None


def test_lookups_that_rewrite_text_are_compiled_for_each_value(
    demo: Any, bob: Any, carol: Any
) -> None:
    """iexact and contains escape LIKE's wildcards: "s_" is not "s1" however "s1" went first."""
    _seed(demo, bob, carol)
    for lookup in ("name__iexact", "name__contains", "name__istartswith"):
        statement = Statement(_jobs)
        for value in ("S1", "s_", "s%", "S1"):
            assert statement.rows(value, shape=(lookup,)) == _orm((lookup,), value)


def test_a_reused_statement_runs_one_query(demo: Any, bob: Any, carol: Any) -> None:
    _seed(demo, bob, carol)
    statement = Statement(_jobs)
    shape = ("workspace__name",)
    statement.rows("workspace_b", shape=shape)
    with CaptureQueriesContext(connection) as queries:
        rows = statement.rows("workspace_c", shape=shape)
    assert len(queries) == 1
    assert {r["quota__name"] for r in rows} == {"Quota 1.2"}


def test_a_statement_keeps_the_shapes_last_used(
    demo: Any, bob: Any, carol: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory stays bounded however many shapes come; a dropped one is compiled again."""
    from console.fast import statements

    _seed(demo, bob, carol)
    monkeypatch.setattr(statements, "KEPT", 2)
    statement = Statement(_jobs)
    for _ in range(2):
        for shape, values in QUERIES[:6]:
            assert statement.rows(*values, shape=shape) == _orm(shape, *values)
    kept = statement.kept(connections["default"])
    assert [shape for shape, _ in kept] == [("workspace__name", "status"), ("owner__username",)]


def test_with_the_switch_off_a_statement_is_its_queryset(
    demo: Any, bob: Any, carol: Any, settings: Any
) -> None:
    _seed(demo, bob, carol)
    settings.TIDEPOOL_FAST_PATHS = False
    statement = Statement(_jobs)
    shape = ("workspace__name",)
    assert statement.rows("workspace_b", shape=shape, high=3) == _orm(shape, "workspace_b", high=3)
    assert not statement.kept(connections["default"])


def test_values_other_than_text_and_numbers_are_refused(demo: Any) -> None:
    statement = Statement(_jobs)
    with pytest.raises(TypeError, match="not NoneType"):
        statement.rows(None, shape=("quota_id",))


# Token authentication reads through a statement too.


def test_a_token_answers_for_its_user_until_deleted_or_deactivated(api: Any, bob: Any) -> None:
    client = api(bob)
    assert client.get("/api/v1/jobs/").status_code == 200
    bob.is_active = False
    bob.save(update_fields=["is_active"])
    refused = client.get("/api/v1/jobs/")
    assert refused.status_code == 401
    assert refused.json() == {"detail": "User inactive or deleted."}
    bob.is_active = True
    bob.save(update_fields=["is_active"])
    assert client.get("/api/v1/jobs/").status_code == 200
    Token.objects.filter(user=bob).delete()
    refused = client.get("/api/v1/jobs/")
    assert refused.status_code == 401
    assert refused.json() == {"detail": "Invalid token."}


def test_the_token_user_is_who_the_request_acts_as(api: Any, bob: Any, carol: Any) -> None:
    """Two users' tokens on one connection: each list shows that user's workspaces only."""
    for user, workspace in [(bob, "workspace_b"), (carol, "workspace_c"), (bob, "workspace_b")]:
        response = api(user).get("/api/v1/workspaces/")
        assert response.status_code == 200
        assert [w["name"] for w in response.json()["results"]] == [workspace]


# The workload lists read through statements, restricted to the user's workspaces by id.

LIST_FILTERS = ["", "?workspace=workspace_b", "?workspace=workspace_c", "?owner=carol&page=2"]


@pytest.mark.parametrize("query", LIST_FILTERS, ids=LIST_FILTERS)
@pytest.mark.parametrize("who", ["admin", "bob", "carol"])
def test_a_list_shows_exactly_the_jobs_of_the_users_workspaces(
    api: Any, demo: Any, admin: Any, bob: Any, carol: Any, who: str, query: str
) -> None:
    _seed(demo, bob, carol)
    user = {"admin": admin, "bob": bob, "carol": carol}[who]
    seen = {"admin": None, "bob": {"workspace_b"}, "carol": {"workspace_c"}}[who]
    response = api(user).get(f"/api/v1/jobs/{query}&page_size=4".replace("/&", "/?"))
    assert response.status_code in (200, 404)
    params = dict(p.split("=") for p in query.lstrip("?").split("&") if p)
    jobs = Workload.objects.filter(kind=Kind.TRAINING).order_by("-submitted_at", "-id")
    if seen is not None:
        jobs = jobs.filter(workspace__name__in=seen)
    if "workspace" in params:
        jobs = jobs.filter(workspace__name=params["workspace"])
    if "owner" in params:
        jobs = jobs.filter(owner__username=params["owner"])
    page = int(params.get("page", 1))
    expected = [j.name for j in jobs[(page - 1) * 4 : page * 4]]
    if response.status_code == 404:  # a page past the end
        assert expected == []
        return
    assert response.json()["count"] == jobs.count()
    assert [j["name"] for j in response.json()["results"]] == expected


def test_a_user_in_no_workspace_lists_nothing(api: Any, demo: Any, bob: Any, carol: Any) -> None:
    from django.contrib.auth import get_user_model

    _seed(demo, bob, carol)
    dave = get_user_model().objects.create_user("dave", password="x")
    response = api(dave).get("/api/v1/jobs/?workspace=workspace_b")
    assert response.status_code == 200
    assert response.json() == {"count": 0, "next": None, "previous": None, "results": []}
    refused = api(dave).get("/api/v1/jobs/", {"quota": "²"})
    assert refused.status_code == 400
    assert refused.json() == {"quota": ["'²' is not valid here."]}


@pytest.mark.parametrize("who", ["admin", "bob"])
def test_a_refused_filter_answers_before_a_bad_page(
    api: Any, admin: Any, bob: Any, who: str
) -> None:
    client = api(admin if who == "admin" else bob)
    assert client.get("/api/v1/jobs/?quota=1").status_code == 200  # compiles the quota filter
    response = client.get("/api/v1/jobs/", {"quota": "²", "page": "x"})
    assert response.status_code == 400
    assert response.json() == {"quota": ["'²' is not valid here."]}


@pytest.mark.parametrize("grant", ["none", "own", "group", "both", "superuser", "inactive"])
def test_global_permissions_are_those_django_reads(demo: Any, grant: str) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.backends import ModelBackend
    from django.contrib.auth.models import Group
    from guardian.shortcuts import assign_perm

    from console.auth import CompiledModelBackend
    from console.permissions import PLATFORM_ADMIN_PERM

    users = get_user_model().objects
    dave = users.create_user("dave", is_superuser=grant == "superuser")
    dave.is_active = grant != "inactive"
    dave.save()
    if grant in {"own", "both", "inactive"}:
        assign_perm(PLATFORM_ADMIN_PERM, dave)
    if grant in {"group", "both"}:
        team = Group.objects.create(name="team")
        team.user_set.add(dave)
        assign_perm("workspaces.view_workspace", team)
    for _ in range(2):  # the second read reuses the compiled statements
        compiled = CompiledModelBackend().get_all_permissions(users.get(pk=dave.pk))
        assert compiled == ModelBackend().get_all_permissions(users.get(pk=dave.pk))
    expected = {
        "none": set(),
        "own": {PLATFORM_ADMIN_PERM},
        "group": {"workspaces.view_workspace"},
        "both": {PLATFORM_ADMIN_PERM, "workspaces.view_workspace"},
        "inactive": set(),
    }
    if grant in expected:
        assert compiled == expected[grant]
    else:
        assert PLATFORM_ADMIN_PERM in compiled and "workspaces.view_workspace" in compiled


def _arabic_indic(number: int) -> str:
    return "".join(chr(0x660 + int(d)) for d in str(number))


@pytest.mark.parametrize(
    ("quota", "status"),
    [
        ("12345678901234567890", 200),  # digits past 64 bits: only a name can match
        ("²", 400),  # a digit int() refuses
        ("arabic", 200),  # Quota 1.1's id in Arabic-Indic digits: the ORM reads it as the id
    ],
    ids=["20 digits", "superscript", "arabic digits"],
)
def test_a_quota_filter_of_odd_digits_answers_as_the_orm(
    api: Any, demo: Any, admin: Any, bob: Any, carol: Any, quota: str, status: int
) -> None:
    """After an id has compiled the quota filter's statement, odd digits still answer right."""
    _seed(demo, bob, carol)
    client = api(admin)
    assert client.get(f"/api/v1/jobs/?quota={demo.quotas['Quota 1.2'].pk}").status_code == 200
    quota_id = demo.quotas["Quota 1.1"].pk
    if quota == "arabic":
        quota = _arabic_indic(quota_id)
    response = client.get("/api/v1/jobs/", {"quota": quota})
    assert response.status_code == status
    if status == 400:
        assert response.json() == {"quota": [f"{quota!r} is not valid here."]}
        return
    by_id = quota == _arabic_indic(quota_id)
    assert response.json()["count"] == (15 if by_id else 0)
    assert Workload.objects.filter(quota_id=quota_id).count() == 15
