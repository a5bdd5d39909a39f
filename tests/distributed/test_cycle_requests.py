"""Cycle requests are merged: a burst of submits queues one Celery message, and every job runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from jobs.choices import Status
from jobs.models import Workload
from jobs.services.workloads import Shape, job_submit
from jobs.wakeup import QUEUED_KEY

from .conftest import CeleryProcesses

pytestmark = pytest.mark.django_db(transaction=True)

# Celery's default queue: a Redis list of the messages no worker has taken yet.
QUEUE = "celery"


def test_a_burst_of_submits_queues_one_cycle_and_every_job_is_admitted(
    demo: Any, bob: Any, celery: CeleryProcesses, eventually: Callable[..., Any]
) -> None:
    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.delete(QUEUE)
    cache.delete(QUEUED_KEY)
    ws = demo.workspaces["workspace_b"]
    jobs = [
        job_submit(
            actor=bob,
            workspace=ws,
            quota=ws.quotas.get(),
            name=f"burst-{i}",
            shape=Shape(replicas=1, gpu=1000),
            node_pools=[demo.node_pool],
        )
        for i in range(20)
    ]
    assert broker.llen(QUEUE) == 1  # no worker yet: what the burst sent waits in the queue

    celery.worker()  # started after the burst (the fixture purged the queue before it)
    eventually(
        lambda: (
            Workload.objects.filter(pk__in=[j.pk for j in jobs], status=Status.RUNNING).count()
            == len(jobs)
        ),
        what="the one queued cycle to admit every job of the burst",
    )
