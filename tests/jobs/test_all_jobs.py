"""All jobs: every workspace's training jobs for platform admins, filtered, searched, paged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse

from jobs.choices import Kind, Status
from jobs.models import Workload

pytestmark = pytest.mark.django_db

URL = "/jobs/"
START = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


def _jobs(
    demo: Any, user: Any, workspace: str, quota: str, names: list[str], **fields: Any
) -> None:
    """Training job rows, newest last, without the control loop."""
    Workload.objects.bulk_create(
        Workload(
            workspace=demo.workspaces[workspace],
            quota=demo.quotas[quota],
            owner=user,
            name=name,
            kind=Kind.TRAINING,
            replicas=1,
            gpu=8000,
            total_work=8 * 3600,
            submitted_at=START + timedelta(minutes=i),
            **fields,
        )
        for i, name in enumerate(names)
    )


@pytest.fixture
def jobs(demo: Any, alice: Any, bob: Any, carol: Any) -> None:
    _jobs(demo, bob, "workspace_b", "Quota 1.1", ["resnet-1", "resnet-2"], status=Status.QUEUED)
    _jobs(
        demo,
        bob,
        "workspace_b",
        "Quota 1.1",
        ["bert-done"],
        status=Status.SUCCEEDED,
        progress=8 * 3600,
    )
    _jobs(
        demo, carol, "workspace_c", "Quota 1.2", ["gpt-run"], status=Status.RUNNING, in_quota=False
    )
    _jobs(demo, alice, "workspace_a", "Quota 1", ["llama-in"], status=Status.RUNNING, in_quota=True)


def _names(response: Any) -> list[str]:
    assert response.status_code == 200
    return sorted(r.workload.name for r in response.context["rows"])


def test_the_url_is_named_all_jobs() -> None:
    assert reverse("all_jobs") == URL


@pytest.mark.parametrize(
    ("persona", "status"),
    [("admin", 200), ("alice", 404), ("bob", 404), ("carol", 404), (None, 302)],
    ids=["platform-admin", "member-a", "member-b", "member-c", "anonymous"],
)
def test_only_platform_admins_see_all_jobs(
    demo: Any, login: Any, jobs: None, request: Any, persona: str | None, status: int
) -> None:
    user = request.getfixturevalue(persona) if persona else None
    response = login(user).get(URL)
    assert response.status_code == status
    if status == 302:
        assert response["Location"].startswith(reverse("login"))
    if status == 404:
        assert b"gpt-run" not in response.content


def test_all_jobs_lists_every_workspace_finished_included(
    demo: Any, login: Any, admin: Any, jobs: None
) -> None:
    response = login(admin).get(URL)
    assert _names(response) == ["bert-done", "gpt-run", "llama-in", "resnet-1", "resnet-2"]
    page = response.content.decode()
    assert 'data-field="workspace"' in page and "workspace_c" in page
    assert (
        reverse("jobs:job_detail", args=["workspace_c", Workload.objects.get(name="gpt-run").pk])
        in page
    )
    # the finished job shows 100% and no quota badge
    done = next(r for r in response.context["rows"] if r.workload.name == "bert-done")
    assert (done.progress, done.quota_label) == (100, "")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"workspace": "ws:workspace_b"}, ["bert-done", "resnet-1", "resnet-2"]),
        ({"quota_id": "q:Quota 1.2"}, ["gpt-run"]),
        ({"status": "succeeded"}, ["bert-done"]),
        ({"quota": "in"}, ["llama-in"]),
        ({"quota": "not"}, ["gpt-run"]),
        ({"owner": "user:carol"}, ["gpt-run"]),
        ({"search": "RESNET"}, ["resnet-1", "resnet-2"]),
        ({"workspace": "ws:workspace_b", "status": "Queued", "search": "2"}, ["resnet-2"]),
    ],
    ids=["workspace", "quota", "status", "in-quota", "not-in-quota", "owner", "search", "all"],
)
def test_all_jobs_filters(
    demo: Any, login: Any, admin: Any, jobs: None, query: dict[str, str], expected: list[str]
) -> None:
    from django.contrib.auth import get_user_model

    ids = {
        "ws": {w.name: w.pk for w in demo.workspaces.values()},
        "q": {q.name: q.pk for q in demo.quotas.values()},
        "user": dict(get_user_model().objects.values_list("username", "pk")),
    }
    params = {}
    for key, value in query.items():
        kind, _, name = value.partition(":")
        params[key] = str(ids[kind][name]) if name and kind in ids else value
    response = login(admin).get(URL, params)
    assert _names(response) == expected
    assert response.context["filters"] == params


def test_a_bad_filter_is_reported_and_left_out(
    demo: Any, login: Any, admin: Any, jobs: None
) -> None:
    response = login(admin).get(URL, {"workspace": "abc", "status": "running"})
    assert _names(response) == ["gpt-run", "llama-in"]
    assert response.context["filter_problems"][0].startswith("Workspace:")


def test_all_jobs_pages_by_fifty_and_the_links_keep_the_filters(
    demo: Any, login: Any, admin: Any, bob: Any
) -> None:
    _jobs(demo, bob, "workspace_b", "Quota 1.1", [f"sweep-{i:03d}" for i in range(55)])
    _jobs(demo, bob, "workspace_b", "Quota 1.1", ["other"])
    client = login(admin)
    first = client.get(URL, {"search": "sweep"})
    assert (first.context["total"], first.context["pages"], len(first.context["rows"])) == (
        55,
        2,
        50,
    )
    assert first.context["rows"][0].workload.name == "sweep-054"  # newest first
    assert "search=sweep" in first.context["next_link"] and "page=2" in first.context["next_link"]
    second = client.get(URL + first.context["next_link"])
    assert [r.workload.name for r in second.context["rows"]] == [
        f"sweep-{i:03d}" for i in range(4, -1, -1)
    ]
    assert second.context["prev_link"] is not None and second.context["next_link"] is None


def test_all_jobs_makes_the_same_number_of_queries_whatever_the_rows(
    demo: Any, login: Any, admin: Any, bob: Any, django_assert_max_num_queries: Any
) -> None:
    client = login(admin)
    _jobs(demo, bob, "workspace_b", "Quota 1.1", ["a", "b"])
    client.get(URL)  # warm the session and the content types
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        client.get(URL)
    _jobs(demo, bob, "workspace_b", "Quota 1.1", [f"n-{i}" for i in range(120)])
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get(URL)
