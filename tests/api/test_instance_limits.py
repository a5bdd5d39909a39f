"""Interactive time limits through the API: the workspace shows them, PATCH sets them."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.choices import EventKind, Status
from jobs.models import Workload, WorkloadEvent
from jobs.services.workloads import Shape, instance_start
from workspaces.choices import Role
from workspaces.models import Workspace
from workspaces.services import workspace_member_add

pytestmark = pytest.mark.django_db

HOUR = 3600
TEN_YEARS = 87600 * HOUR


def _url(demo: Any, ws: str = "workspace_c") -> str:
    return f"/api/v1/workspaces/{demo.workspaces[ws].pk}/"


def _limits(ws: str = "workspace_c") -> tuple[int | None, int | None]:
    saved = Workspace.objects.get(name=ws)
    return saved.instance_default_duration, saved.instance_max_duration


def test_the_workspace_shows_both_limits(api: Any, demo: Any, carol: Any) -> None:
    body = api(carol).get(_url(demo)).json()
    assert (body["instance_default_duration"], body["instance_max_duration"]) == (None, None)
    Workspace.objects.filter(name="workspace_c").update(
        instance_default_duration=2 * HOUR, instance_max_duration=8 * HOUR
    )
    listed = api(carol).get("/api/v1/workspaces/").json()["results"][0]
    assert (listed["instance_default_duration"], listed["instance_max_duration"]) == (
        2 * HOUR,
        8 * HOUR,
    )


def test_patch_sets_the_limits_and_shortens_active_instances(
    api: Any, demo: Any, admin: Any, carol: Any, clock: Any
) -> None:
    notebook = instance_start(
        actor=carol,
        workspace=demo.workspaces["workspace_c"],
        quota=demo.quotas["Quota 1.2"],
        name="notebook",
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        max_duration=TEN_YEARS,
        now=clock.now(),
    )
    body = {"instance_default_duration": 2 * HOUR, "instance_max_duration": 8 * HOUR}
    response = api(admin).patch(_url(demo), body, format="json")
    assert response.status_code == 200, response.content
    shown = response.json()
    assert (shown["instance_default_duration"], shown["instance_max_duration"]) == (
        2 * HOUR,
        8 * HOUR,
    )
    assert _limits() == (2 * HOUR, 8 * HOUR)
    notebook.refresh_from_db()
    assert (notebook.status, notebook.max_duration) == (Status.QUEUED, 8 * HOUR)
    event = WorkloadEvent.objects.get(workload=notebook, kind=EventKind.LIMIT)
    assert event.message.startswith("Time limit lowered from 87600 h to 8 h: admin capped")
    detail = api(carol).get(f"/api/v1/instances/{notebook.pk}/").json()
    assert [e["kind"] for e in detail["events"]] == ["submitted", "limit"]


def test_patch_keeps_a_limit_it_does_not_name_and_null_removes_one(
    api: Any, demo: Any, admin: Any
) -> None:
    client = api(admin)
    client.patch(_url(demo), {"instance_default_duration": HOUR}, format="json")
    client.patch(_url(demo), {"instance_max_duration": 4 * HOUR}, format="json")
    assert _limits() == (HOUR, 4 * HOUR)
    client.patch(_url(demo), {"instance_default_duration": None}, format="json")
    assert _limits() == (None, 4 * HOUR)


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            {"instance_default_duration": 10 * HOUR, "instance_max_duration": 8 * HOUR},
            "instance_default_duration",
            "The default duration (10 h) may not be longer than the maximum (8 h).",
        ),
        (
            {"instance_max_duration": 30},
            "instance_max_duration",
            "The maximum duration must be at least 60 s, not 30 s.",
        ),
        ({"instance_max_duration": "eight hours"}, "instance_max_duration", "Enter a number."),
        (
            {"instance_default_duration": -5},
            "instance_default_duration",
            "Ensure this value is greater than or equal to 0.",
        ),
    ],
    ids=["default-above-max", "under-a-minute", "not-a-number", "negative"],
)
def test_patch_refuses_bad_limits_with_400_naming_the_field(
    api: Any, demo: Any, admin: Any, body: dict[str, Any], field: str, message: str
) -> None:
    response = api(admin).patch(_url(demo), body, format="json")
    assert response.status_code == 400
    assert response.json() == {field: [message]}
    assert _limits() == (None, None)


def test_a_member_gets_403_an_outsider_404_and_anonymous_401(
    api: Any, demo: Any, alice: Any, carol: Any
) -> None:
    body = {"instance_max_duration": HOUR}
    assert api(carol).patch(_url(demo), body, format="json").status_code == 403
    assert api(alice).patch(_url(demo), body, format="json").status_code == 404
    assert api(None).patch(_url(demo), body, format="json").status_code == 401
    assert _limits() == (None, None)
    # a workspace admin manages the workspace
    workspace_member_add(workspace=demo.workspaces["workspace_c"], user=carol, role=Role.ADMIN)
    assert api(carol).patch(_url(demo), body, format="json").status_code == 200
    assert _limits() == (None, HOUR)


def test_an_instance_without_a_duration_gets_the_default_and_ten_years_is_refused(
    api: Any, demo: Any, carol: Any
) -> None:
    Workspace.objects.filter(name="workspace_c").update(
        instance_default_duration=2 * HOUR, instance_max_duration=8 * HOUR
    )
    client = api(carol)
    body: dict[str, Any] = {"workspace": "workspace_c", "name": "nb", "gpu": 1}
    response = client.post("/api/v1/instances/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["max_duration"] == 2 * HOUR
    body |= {"name": "forever", "max_duration": TEN_YEARS}
    refused = client.post("/api/v1/instances/", body, format="json")
    assert refused.status_code == 400
    assert refused.json() == {
        "max_duration": ["workspace_c caps interactive instances at 8 h; this asks for 87600 h."]
    }
    assert not Workload.objects.filter(name="forever").exists()


def test_without_a_default_an_instance_must_name_its_duration(
    api: Any, demo: Any, carol: Any
) -> None:
    body = {"workspace": "workspace_c", "name": "nb", "gpu": 1}
    refused = api(carol).post("/api/v1/instances/", body, format="json")
    assert refused.status_code == 400
    assert refused.json() == {
        "max_duration": ["Give a maximum duration: workspace_c sets no default for interactive "
                         "instances."]
    }  # fmt: skip
