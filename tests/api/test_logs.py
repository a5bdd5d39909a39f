"""GET /api/v1/{jobs,services,instances}/{id}/logs/: a replica's recent lines, members only."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from jobs.backends.log_lines import line_time
from jobs.choices import PodStatus
from jobs.models import Workload
from jobs.services.workloads import Shape, instance_start
from tests.jobs import conftest as control
from tests.jobs.borrowing import borrow, name_lost_nodes, named
from workspaces.choices import Role
from workspaces.services import workspace_member_add

pytestmark = pytest.mark.django_db
service = control.service  # Alice's chat-api (tests/jobs/conftest.py)


@pytest.fixture
def job(bob: Any, submit: Callable[..., Workload], tick: Callable[..., None]) -> Workload:
    """Bob's two-replica job, running for ten minutes."""
    made = submit(bob, "resnet", replicas=2)
    tick(0)
    tick(31)
    tick(600)
    return made


def url(workload: Workload, query: str = "") -> str:
    """The workload's logs endpoint."""
    kind = {"training": "jobs", "inference": "services", "interactive": "instances"}
    return f"/api/v1/{kind[workload.kind]}/{workload.pk}/logs/{query}"


def test_members_read_their_workspace_logs_and_nobody_else_sees_the_job(
    api: Callable[[Any], Any], job: Workload, bob: Any, alice: Any, admin: Any, demo: Any
) -> None:
    viewer = get_user_model().objects.create_user("vera", password="x")
    workspace_member_add(workspace=demo.workspaces["workspace_b"], user=viewer, role=Role.VIEWER)
    for reader in (bob, viewer, admin):
        answer = api(reader).get(url(job, "?tail=5"))
        assert answer.status_code == 200, reader
        body = answer.json()
        assert body["replica"] == 0 and body["attempt"] == 0 and body["replicas"] == [0, 1]
        assert body["pod"] == f"tp-{job.pk}-0-0" and body["status"] == "Running" and body["live"]
        assert len(body["lines"]) == 5 and "[rank 0] step 20 loss" in body["lines"][-1]
    outsider = api(alice).get(url(job))
    assert outsider.status_code == 404
    assert outsider.json() == {"detail": f"No job with id {job.pk}."}
    assert api(None).get(url(job)).status_code == 401
    # Under another kind's route the job is not found either.
    assert api(bob).get(f"/api/v1/services/{job.pk}/logs/").status_code == 404


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?replica=2", "replica"),
        ("?replica=-1", "replica"),
        ("?replica=x", "replica"),
        ("?attempt=3", "attempt"),
        ("?tail=0", "tail"),
        ("?tail=5001", "tail"),
        ("?tail=lots", "tail"),
        ("?since=yesterday", "since"),
    ],
    ids=lambda value: value,
)
def test_bad_parameters_answer_400_naming_the_field(
    api: Callable[[Any], Any], job: Workload, bob: Any, query: str, field: str
) -> None:
    answer = api(bob).get(url(job, query))
    assert answer.status_code == 400
    assert list(answer.json()) == [field]


def test_a_missing_replica_is_named_with_the_ones_there_are(
    api: Callable[[Any], Any], job: Workload, bob: Any
) -> None:
    answer = api(bob).get(url(job, "?replica=2"))
    assert answer.json() == {"replica": ["resnet has no replica 2 (replicas: 0, 1)."]}


def test_since_follows_a_running_replica_until_it_ends(
    api: Callable[[Any], Any],
    job: Workload,
    bob: Any,
    sim: Any,
    tick: Callable[..., None],
) -> None:
    client = api(bob)
    first = client.get(url(job, "?replica=1")).json()
    assert first["lines"] and first["since"]
    last = line_time(first["lines"][-1])
    assert last is not None and last.isoformat() == first["since"].replace("Z", "+00:00")
    tick(90)
    later = client.get(url(job), {"replica": 1, "since": first["since"]}).json()
    assert [line.split(" ", 1)[1].split(" loss")[0] for line in later["lines"]] == [
        "[rank 1] step 21",
        "[rank 1] step 22",
        "[rank 1] step 23",
    ]
    sim.inject_pod_crash(job.pods.get(index=1), exit_code=3)
    tick(5)
    ended = client.get(url(job), {"replica": 1, "attempt": 0, "since": later["since"]}).json()
    assert not ended["live"] and ended["status"] == PodStatus.FAILED
    assert ended["lines"][-1].endswith("process exited; exit code 3")


def test_a_queued_job_has_no_replica_yet_and_says_so(
    api: Callable[[Any], Any], bob: Any, submit: Callable[..., Workload]
) -> None:
    queued = submit(bob, "later")
    body = api(bob).get(url(queued)).json()
    assert body["replica"] is None and body["lines"] == []
    assert body["notice"] == "later has not been placed yet."


def test_a_replica_not_started_gives_its_notice(
    api: Callable[[Any], Any], bob: Any, submit: Callable[..., Workload], tick: Any
) -> None:
    placed = submit(bob, "starting")
    tick(0)
    body = api(bob).get(url(placed)).json()
    assert body["status"] == "Pending" and body["live"] and body["lines"] == []
    assert body["notice"] == f"tp-{placed.pk}-0-0 has not started yet: its container is starting."


def test_services_and_instances_serve_their_logs(
    api: Callable[[Any], Any],
    alice: Any,
    demo: Any,
    clock: Any,
    service: Workload,
    tick: Callable[..., None],
) -> None:
    notebook = instance_start(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="nb",
        shape=Shape(replicas=1, gpu=1000),
        node_pools=[demo.node_pool],
        max_duration=7200,
        now=clock.now(),
    )
    tick(0)
    tick(31)
    tick(120)
    served = api(alice).get(url(service)).json()
    assert "requests in the last minute" in served["lines"][-1]
    jupyter = api(alice).get(url(notebook)).json()
    assert "Jupyter Server" in jupyter["lines"][0]


def test_members_read_no_node_name_of_a_borrowed_replica(
    api: Callable[[Any], Any],
    bob: Any,
    admin: Any,
    sim: Any,
    submit: Callable[..., Workload],
    tick: Callable[..., None],
) -> None:
    borrowed = borrow(submit, tick, bob)
    name_lost_nodes(sim)
    pod = borrowed.pods.select_related("node").get(index=0)
    assert pod.node is not None
    sim.inject_node_down(pod.node.name)
    tick(5)
    query = "?replica=0&attempt=0"
    assert pod.node.name in json.dumps(api(admin).get(url(borrowed, query)).json())
    member = api(bob).get(url(borrowed, query)).json()
    assert named(json.dumps(member)) == []
    assert member["lines"][-1].endswith("ERROR Node lost: a borrowed node is not ready")
