"""A borrowed job's node is never shown to team members; platform admins see it everywhere.

PAI: "when a job runs on shared idle resources, the node name is not shown". Each test runs a
borrowed job and searches every page, fragment and websocket frame for every node name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.urls import reverse

from console.asgi import application
from jobs.backends.simulated import SimulatedBackend
from jobs.choices import EventKind, Status
from jobs.consumers import events_of
from jobs.events import events_after
from jobs.models import Workload, WorkloadEvent
from quotas.amounts import Amounts
from quotas.services.quotas import quota_scale
from tests.jobs.borrowing import borrow, name_lost_nodes, named

WS = "workspace_b"


def _pages(job: Workload) -> list[str]:
    """Every page and fragment a member's browser reads about the job."""
    return [
        reverse("jobs:job_detail", args=[WS, job.pk]),
        reverse("jobs:job_live", args=[WS, job.pk]),
        reverse("jobs:job_list", args=[WS]),
        reverse("jobs:job_row", args=[WS, job.pk]),
    ]


def _read(client: Any, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return str(response.content.decode())


@pytest.mark.django_db
def test_job_pages_show_members_no_node_of_a_borrowed_job(
    bob: Any, admin: Any, submit: Callable[..., Workload], tick: Callable[..., None], login: Any
) -> None:
    job = borrow(submit, tick, bob)
    placed = job.events.get(kind=EventKind.PLACED)
    assert placed.message == "7 replicas placed on idle capacity."
    assert placed.data["borrowed"] is True and len(placed.data["nodes"]) == 7
    nodes = {p.node.name for p in job.pods.all()}

    member = login(bob)
    for url in _pages(job):
        assert named(_read(member, url)) == [], url
    detail = _read(member, reverse("jobs:job_detail", args=[WS, job.pk]))
    assert detail.count("borrowed capacity</span>") == 7
    assert "placed on idle capacity." in detail

    platform = login(admin)
    for url in _pages(job)[:2]:  # the detail and its live fragment: pods and timeline
        body = _read(platform, url)
        assert nodes <= set(named(body)), url
    timeline = _read(platform, reverse("jobs:job_detail", args=[WS, job.pk]))
    assert f"({', '.join(placed.data['nodes'])})" in timeline  # after the borrowed entry


@pytest.mark.django_db
def test_a_borrowed_replica_lost_with_its_node_is_told_to_members_without_its_name(
    bob: Any,
    admin: Any,
    submit: Callable[..., Workload],
    tick: Callable[..., None],
    sim: SimulatedBackend,
    login: Any,
) -> None:
    job = borrow(submit, tick, bob)
    name_lost_nodes(sim)
    lost = job.pods.order_by("index").first()
    assert lost is not None and lost.node is not None
    node = lost.node.name
    sim.inject_node_down(node)
    tick(5)  # the loss is reported, the job restarts from its checkpoint (borrowing again)

    lost.refresh_from_db()
    assert lost.reason == f"Node lost: {node} is not ready"  # the backend's words, for admins
    fault = job.events.get(kind=EventKind.FAULT)
    assert fault.message == "Replica 0 failed: Node lost: a borrowed node is not ready"
    assert fault.data["node"] == node and fault.data["borrowed"] is True
    stopped = job.pods.filter(attempt=0).exclude(pk=lost.pk).values_list("reason", flat=True)
    assert set(stopped) == {f"Restarting: {fault.message}"}
    stored = WorkloadEvent.objects.filter(workload=job).values_list("message", flat=True)
    assert [m for m in stored if named(m)] == []

    member = login(bob)
    for url in _pages(job):
        assert named(_read(member, url)) == [], url
    platform = _read(login(admin), reverse("jobs:job_detail", args=[WS, job.pk]))
    assert f"Node lost: {node} is not ready" in platform
    assert "a borrowed node is not ready <span" in platform and f">({node})</span>" in platform


@pytest.mark.django_db
def test_a_pod_relabelled_not_in_quota_hides_its_node_until_it_is_in_quota_again(
    demo: Any,
    bob: Any,
    admin: Any,
    submit: Callable[..., Workload],
    tick: Callable[..., None],
    login: Any,
) -> None:
    own = submit(bob, "own", replicas=6)  # Quota 1.1's 48 GPUs, In Quota
    tick(1)
    tick(30)
    placed = own.events.get(kind=EventKind.PLACED)
    assert named(placed.message)  # the team's own placement names its nodes
    detail = reverse("jobs:job_detail", args=[WS, own.pk])
    assert named(_read(login(bob), detail))

    quota = demo.quotas["Quota 1.1"]
    quota_scale(actor=admin, quota=quota, resources={demo.node_pool: Amounts(40_000)})
    tick(1)
    own.refresh_from_db()
    assert own.in_quota is False and all(p.borrowed for p in own.pods.all())
    body = _read(login(bob), detail)
    assert named(body) == []
    assert "6 replicas placed on borrowed nodes." in body
    replayed = events_after(0, limit=100, members=True, workload__workspace_id=own.workspace_id)
    assert replayed is not None and named(repr(replayed)) == []
    assert named(_read(login(admin), detail))

    quota_scale(actor=admin, quota=quota, resources={demo.node_pool: Amounts(48_000)})
    tick(1)
    own.refresh_from_db()
    assert own.in_quota is True and own.status == Status.RUNNING
    assert set(named(_read(login(bob), detail))) == {p.node.name for p in own.pods.all()}


# Websocket ------------------------------------------------------------------------------------


async def _open(path: str, user: Any) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://127.0.0.1")]
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected, path
    return communicator


async def _drain(communicator: WebsocketCommunicator) -> list[dict[str, Any]]:
    """Every event that arrives until the socket stays quiet."""
    events: list[dict[str, Any]] = []
    while not await communicator.receive_nothing(timeout=0.5):
        events += events_of(await communicator.receive_json_from())
    return events


async def _ask(communicator: WebsocketCommunicator, after: int | None) -> list[dict[str, Any]]:
    """Send `{"after": after}`; every event up to and including the closing one."""
    await communicator.send_json_to({"after": after})
    frames = events_of(await communicator.receive_json_from(timeout=5))
    while frames[-1].get("kind") not in {"caught_up", "resync"}:
        frames += events_of(await communicator.receive_json_from(timeout=5))
    return frames


def _feeds(demo: Any) -> dict[str, str]:
    """The workspace feed (members, and admins on its pages), the admins' quota and cluster."""
    return {
        "workspace": f"/ws/workspaces/{demo.workspaces[WS].pk}/",
        "quota": f"/ws/quotas/{demo.quotas['Quota 1.1'].pk}/",
        "cluster": "/ws/cluster/",
    }


@pytest.mark.django_db(transaction=True)
def test_live_frames_of_a_borrowed_job_name_no_node_on_the_workspace_feed(
    demo: Any,
    bob: Any,
    admin: Any,
    submit: Callable[..., Workload],
    tick: Callable[..., None],
    run_async: Any,
) -> None:
    feeds = _feeds(demo)

    async def run() -> dict[str, list[dict[str, Any]]]:
        sockets = {
            "bob": await _open(feeds["workspace"], bob),
            "admin on the workspace": await _open(feeds["workspace"], admin),
            "admin on the quota": await _open(feeds["quota"], admin),
            "admin on the cluster": await _open(feeds["cluster"], admin),
        }
        await database_sync_to_async(borrow)(submit, tick, bob)
        frames = {who: await _drain(socket) for who, socket in sockets.items()}
        for socket in sockets.values():
            await socket.disconnect()
        return frames

    frames = run_async(run())
    for who in ("bob", "admin on the workspace"):
        assert named(repr(frames[who])) == [], who
        placed = [f for f in frames[who] if f["kind"] == EventKind.PLACED]
        assert placed and placed[0]["borrowed"] is True and "nodes" not in placed[0], who
    for who in ("admin on the quota", "admin on the cluster"):
        placed = [f for f in frames[who] if f["kind"] == EventKind.PLACED]
        assert len(placed[0]["nodes"]) == 7, who


@pytest.mark.django_db(transaction=True)
def test_replayed_frames_of_a_borrowed_job_name_no_node_on_the_workspace_feed(
    demo: Any,
    bob: Any,
    admin: Any,
    submit: Callable[..., Workload],
    tick: Callable[..., None],
    run_async: Any,
) -> None:
    feeds = _feeds(demo)

    async def run() -> dict[str, list[dict[str, Any]]]:
        page = await _open(feeds["workspace"], bob)
        [where] = await _ask(page, None)
        await page.disconnect()
        await database_sync_to_async(borrow)(submit, tick, bob)
        replayed = {}
        for who, user, feed in (
            ("bob", bob, "workspace"),
            ("admin on the workspace", admin, "workspace"),
            ("admin on the cluster", admin, "cluster"),
        ):
            socket = await _open(feeds[feed], user)
            replayed[who] = await _ask(socket, where["seq"])
            await socket.disconnect()
        return replayed

    replayed = run_async(run())
    for who in ("bob", "admin on the workspace"):
        kinds = {f.get("kind") for f in replayed[who]}
        assert {EventKind.SUBMITTED, EventKind.PLACED, EventKind.STARTED} <= kinds, who
        assert named(repr(replayed[who])) == [], who
    placed = [f for f in replayed["admin on the cluster"] if f.get("kind") == EventKind.PLACED]
    assert len(placed[0]["nodes"]) == 7
