# ruff: noqa: F811 - the Kubernetes fixtures are imported by name
"""Two processes' Kubernetes backends on one API server and one PostgreSQL apply each event once.

Each backend has its own watch thread and cache, as two Celery workers would; their syncs run
at the same time in two threads with their own connections. The write lock makes them take
turns, and each re-reads the rows under it, so every pod is created once (a second try meets
409 and adopts it) and every phase change is applied once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from console.clock import ManualClock
from jobs.backends.kubernetes import KubernetesBackend
from jobs.choices import PodStatus, Status
from jobs.models import Workload
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.sync import backend_sync
from tests.jobs.conftest import clock  # noqa: F401 - a fixture
from tests.jobs.k8s_fake import FakeApiServer, FakeCluster
from tests.jobs.test_kubernetes_backend import (  # noqa: F401 - fixtures
    NAMESPACE,
    cluster,
    running,
    server,
    settle,
    train,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _both(backends: list[KubernetesBackend], cluster: FakeCluster, clock: ManualClock) -> None:
    """Each backend syncs twice, both at once, each thread on its own connection."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(backends))

    def run(backend: KubernetesBackend) -> None:
        try:
            settle(backend, cluster)
            start.wait(10)
            for _ in range(2):
                backend_sync(now=clock.now(), backend=backend)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(b,)) for b in backends]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_two_backends_create_each_pod_once_and_apply_each_phase_once(
    server: FakeApiServer,
    cluster: FakeCluster,
    train: Callable[..., Workload],
    clock: ManualClock,
    settings: Any,
) -> None:
    backends = [KubernetesBackend.from_settings(), KubernetesBackend.from_settings()]
    try:
        job = train(replicas=4)
        with transaction.atomic():
            scheduling_cycle_run(now=clock.now(), backend=backends[0])
        _both(backends, cluster, clock)
        names = {p.name for p in job.pods.all()}
        assert {name for ns, name in cluster.pods if ns == NAMESPACE} == names

        running(cluster, job)
        _both(backends, cluster, clock)
        assert set(job.pods.values_list("status", flat=True)) == {PodStatus.RUNNING}
        assert job.events.filter(kind="started").count() == 1

        for name in names:
            cluster.set_status(NAMESPACE, name, phase="Succeeded")
        _both(backends, cluster, clock)
        job.refresh_from_db()
        assert job.status == Status.SUCCEEDED and job.failures == 0
        assert job.events.filter(kind="finished").count() == 1
    finally:
        for backend in backends:
            backend.close()
