"""A replica's log on Kubernetes: `read_namespaced_pod_log` through the real client.

Against the stand-in API server (tests/jobs/k8s_fake.py), which serves the pod log as a real
one does: text, with tailLines, sinceSeconds and timestamps, and 400 while the container
waits to start.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from console.clock import ManualClock
from jobs.backends.kubernetes import KubernetesBackend
from jobs.backends.log_lines import LogsUnavailable, line_time
from jobs.models import Pod, Workload
from tests.jobs import test_kubernetes_backend as backend_tests
from tests.jobs.k8s_fake import FakeCluster

pytestmark = pytest.mark.django_db
NAMESPACE = backend_tests.NAMESPACE
# The Kubernetes backend tests' fixtures: the stand-in server, the backend, a tick, a job.
server, cluster, k8s = backend_tests.server, backend_tests.cluster, backend_tests.k8s
loop, train = backend_tests.loop, backend_tests.train


@pytest.fixture
def pod(loop: Callable[..., None], train: Callable[..., Workload]) -> Pod:
    """The one replica of Alice's job, its pod created in the cluster (not started)."""
    job = train(replicas=1)
    loop()
    return Pod.objects.select_related("workload__workspace").get(workload=job)


def read(backend: KubernetesBackend, pod: Pod, clock: ManualClock, **kw: Any) -> list[str]:
    """The backend's answer for the pod."""
    kw.setdefault("since", None)
    return backend.logs(pod, now=clock.now(), **kw)


def test_log_lines_come_back_timestamped_and_the_tail_is_honoured(
    k8s: KubernetesBackend, cluster: FakeCluster, pod: Pod, clock: ManualClock
) -> None:
    cluster.set_status(NAMESPACE, pod.name, phase="Running")
    for step in range(1, 6):
        cluster.write_log(NAMESPACE, pod.name, f"step {step} loss {3 - step * 0.1:.1f}")
    lines = read(k8s, pod, clock, tail=3)
    assert [line.split(" ", 1)[1] for line in lines] == [
        "step 3 loss 2.7",
        "step 4 loss 2.6",
        "step 5 loss 2.5",
    ]
    assert all(line_time(line) is not None for line in lines)
    (asked,) = cluster.seen("GET", f"/pods/{pod.name}/log")
    assert asked.path == f"/api/v1/namespaces/{NAMESPACE}/pods/{pod.name}/log"
    assert asked.query == {"container": "main", "tailLines": "3", "timestamps": "true"}


def test_since_returns_only_newer_lines(
    k8s: KubernetesBackend, cluster: FakeCluster, pod: Pod, clock: ManualClock
) -> None:
    cluster.set_status(NAMESPACE, pod.name, phase="Running")
    now = datetime.now(UTC)
    for ago, text in ((30, "old"), (20, "seen"), (10, "new"), (5, "newer")):
        cluster.write_log(NAMESPACE, pod.name, text, at=now - timedelta(seconds=ago))
    seen = read(k8s, pod, clock, tail=100)[1]
    newer = read(k8s, pod, clock, tail=100, since=line_time(seen))
    assert [line.split(" ", 1)[1] for line in newer] == ["new", "newer"]
    asked = cluster.seen("GET", "/log")[-1]
    assert 20 <= int(asked.query["sinceSeconds"]) <= 60  # the server cuts roughly, we exactly


def test_a_pod_not_yet_started_gives_a_clear_line(
    k8s: KubernetesBackend, cluster: FakeCluster, pod: Pod, clock: ManualClock
) -> None:
    with pytest.raises(LogsUnavailable) as refused:
        read(k8s, pod, clock, tail=10)
    assert str(refused.value) == (
        f'{pod.name} has not started yet: container "main" in pod "{pod.name}" '
        "is waiting to start: ContainerCreating"
    )


def test_a_pod_gone_from_the_cluster_gives_a_clear_line(
    k8s: KubernetesBackend, cluster: FakeCluster, pod: Pod, clock: ManualClock
) -> None:
    cluster.set_status(NAMESPACE, pod.name, phase="Running")
    Pod.objects.filter(pk=pod.pk).update(status="Running")
    pod.refresh_from_db()
    cluster.strip_finalizers(NAMESPACE, pod.name)  # recorded and released: deleting removes it
    cluster.vanish(NAMESPACE, pod.name)
    with pytest.raises(LogsUnavailable, match=f"^{pod.name} is gone from the cluster"):
        read(k8s, pod, clock, tail=10)


def test_an_unreachable_cluster_gives_a_clear_line(
    k8s: KubernetesBackend, pod: Pod, clock: ManualClock
) -> None:
    config = client.Configuration()
    config.host = "http://127.0.0.1:9"  # the discard port: nothing listens there
    config.retries = 0
    away = KubernetesBackend(client.CoreV1Api(client.ApiClient(config)), k8s.kube)
    with pytest.raises(LogsUnavailable, match="Could not reach the cluster"):
        read(away, pod, clock, tail=10)
