"""The distributed mode end to end: PostgreSQL, Redis, a Celery worker and Celery beat."""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.testing import WebsocketCommunicator
from django.db import connection, transaction

from console import clock
from jobs.choices import PodStatus, Status
from jobs.consumers import events_of
from jobs.models import ControlState, Workload
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.scaling import scaling_rule_create
from jobs.services.workloads import Shape, job_submit, service_create

pytestmark = pytest.mark.django_db(transaction=True)


def _submit(demo, bob, name: str) -> Workload:
    ws = demo.workspaces["workspace_b"]
    return job_submit(
        actor=bob,
        workspace=ws,
        quota=ws.quotas.get(),
        name=name,
        shape=Shape(replicas=2, gpu=8000),
        node_pools=[demo.node_pool],
    )


def _submit_and_close(demo, bob, name: str) -> Workload:
    """Submit from a thread of its own, closing its connection before the thread ends.

    Left open, it outlives the thread until the garbage collector finds it, and the test
    database cannot be dropped while it is connected.
    """
    try:
        return _submit(demo, bob, name)
    finally:
        connection.close()


def test_runs_on_postgresql() -> None:
    assert connection.vendor == "postgresql"


def test_submit_wakes_the_worker_which_admits_the_job(demo, bob, worker, eventually) -> None:
    job = _submit(demo, bob, "wake-up")
    eventually(
        lambda: Workload.objects.filter(pk=job.pk, status=Status.RUNNING).exists(),
        what="the worker's cycle to admit the job",
    )
    job.refresh_from_db()
    assert job.in_quota is True
    assert job.pods.count() == 2


def test_beat_drives_backend_sync_and_the_pods_start(demo, bob, worker, beat, eventually) -> None:
    job = _submit(demo, bob, "beat-driven")
    eventually(
        lambda: job.pods.filter(status=PodStatus.RUNNING).count() == 2,
        what="beat's backend_sync to report the pods running",
    )


def test_a_scaling_rule_fires_from_its_beat_crontab_entry(demo, alice, worker, beat, eventually):
    service = service_create(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="api",
        shape=Shape(replicas=1, gpu=8000),
        node_pools=[demo.node_pool],
        min_replicas=1,
        max_replicas=4,
    )
    scaling_rule_create(
        service=service,
        name="every-minute",
        cron="* * * * *",
        timezone="UTC",
        target_replicas=3,
        now=clock.now(),
    )
    eventually(
        lambda: Workload.objects.get(pk=service.pk).replicas == 3,
        timeout=75,
        what="the rule's crontab task to scale the service",
    )
    eventually(
        lambda: service.pods.filter(status__in=[PodStatus.PENDING, PodStatus.RUNNING]).count() == 3,
        what="the next cycle to place the new replicas",
    )


def test_worker_events_reach_a_websocket_through_redis(
    demo, bob, worker, eventually, run_async
) -> None:
    from console.asgi import application

    ws = demo.workspaces["workspace_b"]

    async def listen() -> dict:
        communicator = WebsocketCommunicator(
            application, f"/ws/workspaces/{ws.pk}/", headers=[(b"origin", b"http://127.0.0.1")]
        )
        communicator.scope["user"] = bob
        connected, _ = await communicator.connect()
        assert connected
        await asyncio.to_thread(_submit_and_close, demo, bob, "pushed")
        try:
            while True:
                frame = await communicator.receive_json_from(timeout=30)
                for event in events_of(frame):
                    if event.get("kind") == "admitted":
                        return event
        finally:
            await communicator.disconnect()

    event = run_async(listen())
    assert event["name"] == "pushed" and event["in_quota"] is True


def test_only_one_cycle_runs_at_a_time() -> None:
    ControlState.objects.get_or_create(pk=1)
    holding, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with transaction.atomic():
            ControlState.objects.select_for_update().get(pk=1)
            holding.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    holding.wait(10)
    try:
        assert scheduling_cycle_run(now=clock.now()).ran is False
    finally:
        release.set()
        holder.join()
    assert scheduling_cycle_run(now=clock.now()).ran is True
