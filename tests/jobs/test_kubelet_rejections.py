"""Kubelet admission rejections are placement failures, with the real client and a kubelet.

The stand-in API server (k8s_fake.py) and its kubelets (k8s_kubelet.py) refuse pods as a real
kubelet does; the backend must place the replica again on another node, charge no restart,
cool the refusing node down and quote the kubelet on the timeline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from cluster.models import Node
from console.clock import ManualClock
from jobs.backends.kubernetes import KubernetesBackend
from jobs.backends.kubernetes.status import observe_pod
from jobs.choices import EventKind, PodStatus, Status
from jobs.models import Pod, Workload
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.sync import backend_sync
from jobs.services.workloads import Shape, service_create
from tests.jobs.k8s_fake import FakeCluster
from tests.jobs.k8s_kubelet import Kubelet
from tests.jobs.test_kubernetes_backend import (  # noqa: F401 (fixtures)
    NAMESPACE,
    POOL,
    cluster,
    creates,
    k8s,
    loop,
    server,
    train,
)

SAID = (
    "OutOfnvidia.com/gpu: Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, "
    "requested: 8, used: 8, capacity: 8"
)


@pytest.fixture
def kubelet(cluster: FakeCluster) -> Kubelet:  # noqa: F811
    """The kubelets of the stand-in's nodes."""
    return Kubelet(cluster)


def hog(cluster: FakeCluster, node: str, name: str = "other-team-0") -> None:  # noqa: F811
    """Another team's pod, not Tidepool's, takes every GPU of `node`."""
    resources = {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}
    cluster.put_pod(
        {
            "metadata": {"name": name, "namespace": "other-team", "labels": {"app": "sim"}},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "sim", "image": "sim:1", "resources": resources}],
            },
            "status": {"phase": "Running"},
        }
    )


def live_pod(workload: Workload) -> Pod:
    (pod,) = Pod.objects.filter(workload=workload, status__in=("Pending", "Running"))
    return pod


def test_a_kubelet_rejection_places_the_replica_on_another_node_uncharged(
    loop: Callable[..., None],  # noqa: F811
    train: Callable[..., Workload],  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
    kubelet: Kubelet,
    clock: ManualClock,
) -> None:
    job = train(replicas=1)
    loop()
    first = live_pod(job)
    refusing = first.node.name if first.node else ""
    hog(cluster, refusing)  # lands after Tidepool chose the node, before the kubelet admits
    assert kubelet.sync() == [first.name]
    loop()

    job.refresh_from_db()
    first.refresh_from_db()
    assert first.status == PodStatus.FAILED
    assert first.reason == f"Refused by node {refusing}: {SAID}"
    assert (job.restarts, job.failures) == (0, 0)
    entry = job.events.get(kind=EventKind.FAULT)
    assert SAID in entry.message and "no restart is charged" in entry.message
    assert Node.objects.get(name=refusing).cooldown_until > clock.now()

    loop()  # the next cycle places it again, on another node
    kubelet.sync()
    loop()
    again = live_pod(job)
    assert again.pk != first.pk and again.node and again.node.name != refusing
    assert again.status == PodStatus.RUNNING
    job.refresh_from_db()
    assert job.status == Status.RUNNING and (job.restarts, job.failures) == (0, 0)
    reasons = [e["reason"] for e in cluster.events]
    assert reasons.count("Scheduled") == 2 and "NodeRefused" in reasons


def test_a_refused_service_replica_is_not_recreated_on_the_same_node_and_gives_up(
    loop: Callable[..., None],  # noqa: F811
    alice: Any,
    demo: Any,
    cluster: FakeCluster,  # noqa: F811
    k8s: KubernetesBackend,  # noqa: F811
    kubelet: Kubelet,
    clock: ManualClock,
) -> None:
    # The node rows never catch up with the other team (no node sync in this test), so
    # every node the core picks is refused by its kubelet.
    k8s.kube = dataclasses.replace(k8s.kube, node_sync_seconds=10**9)
    service = service_create(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="chat",
        shape=Shape(replicas=1, gpu=8000, cpu=4000, memory=16384),
        node_pools=[demo.node_pool],
        image="ghcr.io/acme/serve:1",
        now=clock.now(),
    )
    loop()  # the node rows are read once, before the other team arrives
    for i, name in enumerate(sorted(cluster.nodes)):
        hog(cluster, name, f"other-team-{i}")
    for _ in range(20):
        loop()
        kubelet.sync()
    service.refresh_from_db()
    refused = Pod.objects.filter(workload=service, status=PodStatus.FAILED)
    nodes = [p.node.name for p in refused.select_related("node") if p.node]
    assert len(nodes) == 5 and len(set(nodes)) == 5  # never twice on one node
    assert service.status == Status.FAILED and service.restarts == 0
    assert "Nodes refused this workload's replicas 5 times" in service.status_reason
    assert SAID in service.status_reason


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda c, n: c.add_node(n, labels={POOL: "A100-80G"}, unschedulable=True), "cordoned"),
        (lambda c, n: c.add_node(n, labels={POOL: "A100-80G"}, ready=False), "is not ready"),
        (lambda c, n: c.nodes.pop(n), "is gone"),
    ],
    ids=["cordoned", "not-ready", "deleted"],
)
def test_a_node_that_becomes_ineligible_just_before_create_gets_no_pod(
    change: Callable[[FakeCluster, str], Any],
    why: str,
    train: Callable[..., Workload],  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
    k8s: KubernetesBackend,  # noqa: F811
    clock: ManualClock,
    django_capture_on_commit_callbacks: Any,
) -> None:
    k8s.sync_nodes(now=clock.now())
    job = train(replicas=1)
    with django_capture_on_commit_callbacks(execute=True):
        scheduling_cycle_run(now=clock.now(), backend=k8s)
    chosen = live_pod(job)
    node = chosen.node.name if chosen.node else ""
    change(cluster, node)  # between the cycle's choice and the create
    with django_capture_on_commit_callbacks(execute=True):
        backend_sync(now=clock.now(), backend=k8s)
    assert creates(cluster) == []
    chosen.refresh_from_db()
    job.refresh_from_db()
    assert chosen.status == PodStatus.FAILED and why in chosen.reason
    assert (job.status, job.restarts, job.failures) == (Status.REQUEUED, 0, 0)
    clock.advance(5)
    with django_capture_on_commit_callbacks(execute=True):
        scheduling_cycle_run(now=clock.now(), backend=k8s)
    again = live_pod(job)
    assert again.node and again.node.name != node


def ran(state: str) -> dict[str, Any]:
    """A container status in `state` (running or terminated)."""
    return {"name": "main", "state": {state: {"exitCode": 137} if state == "terminated" else {}}}


@pytest.mark.parametrize(
    ("status", "refused"),
    [
        ({"reason": "OutOfcpu", "message": "Pod was rejected: Node didn't have enough"}, True),
        ({"reason": "OutOfnvidia.com/gpu"}, True),
        ({"reason": "UnexpectedAdmissionError", "message": "Allocate failed"}, True),
        ({"reason": "TaintToleration"}, True),
        ({"reason": "NodeAffinity"}, True),
        ({"reason": "Evicted", "message": "The node had condition: [DiskPressure]."}, True),
        ({"reason": "Evicted", "containerStatuses": [ran("terminated")]}, False),
        ({"reason": "OutOfcpu", "containerStatuses": [ran("running")]}, False),
        ({"reason": "DeadlineExceeded"}, False),
        ({}, False),
    ],
    ids=[
        "out-of-cpu",
        "out-of-gpu",
        "device-plugin",
        "noexecute-taint",
        "affinity",
        "evicted-at-admission",
        "evicted-after-running",
        "ran-first",
        "deadline",
        "plain-failure",
    ],
)
def test_kubelet_admission_refusals_are_told_from_application_failures(
    status: dict[str, Any], refused: bool
) -> None:
    seen = observe_pod({"status": {"phase": "Failed", **status}})
    assert seen.phase == PodStatus.FAILED and seen.rejected == refused
