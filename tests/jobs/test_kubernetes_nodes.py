"""What nodes really allow: foreign pods, eligibility, shared and MIG GPUs, and binding.

The real client against the stand-in API server, with nodes recorded from real clusters
(tests/jobs/k8s_data/) and the stand-in's kubelets (k8s_kubelet.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import transaction
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.models import Node
from cluster.services import node_pool_create
from console.clock import ManualClock
from jobs.backends.kubernetes import KubernetesBackend
from jobs.backends.kubernetes.config import KubeConfig, api_client
from jobs.choices import PodStatus, Status
from jobs.models import Pod, Workload
from tests.jobs.k8s_fake import FakeApiServer, FakeCluster
from tests.jobs.k8s_kubelet import Kubelet, put_node, recorded_node
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

A100 = "A100-80G"


def foreign(name: str, node: str, requests: dict[str, str], **extra: Any) -> dict[str, Any]:
    """A pod Tidepool does not own, bound to `node` (a DaemonSet's, another team's)."""
    spec = {
        "nodeName": node,
        "containers": [{"name": "c", "image": "x:1", "resources": {"requests": requests}}],
    }
    meta = {"name": name, "namespace": "kube-system", "labels": extra.pop("labels", {})}
    return {"metadata": meta, "spec": spec, "status": {"phase": extra.pop("phase", "Running")}}


def only(cluster: FakeCluster, *nodes: tuple[str, str, str | None]) -> None:  # noqa: F811
    """Replace the stand-in's nodes with recorded ones: (fixture, name, pool)."""
    cluster.nodes.clear()
    for fixture, name, pool in nodes:
        put_node(cluster, recorded_node(fixture, name, pool))


def row(name: str) -> Node:
    return Node.objects.get(name=name)


def test_pods_it_does_not_own_reduce_node_capacity_over_every_list_page(
    k8s: KubernetesBackend,  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
    clock: ManualClock,
) -> None:
    # a DaemonSet on every node, 40 pods each: more than one page of 500
    for n in range(1, 17):
        for i in range(40):
            cluster.put_pod(foreign(f"ds-{n}-{i}", f"a100-{n:02d}", {"cpu": "25m"}))
    cluster.put_pod(foreign("sim-0", "a100-01", {"nvidia.com/gpu": "3", "memory": "64Gi"}))
    # finished pods hold nothing; another Tidepool instance's pods are foreign all the same
    cluster.put_pod(foreign("done-0", "a100-02", {"nvidia.com/gpu": "8"}, phase="Succeeded"))
    staging = {"app.kubernetes.io/managed-by": "tidepool", "tidepool.io/instance": "staging"}
    cluster.put_pod(foreign("tp-9-0-0", "a100-03", {"nvidia.com/gpu": "2"}, labels=staging))
    k8s.sync_nodes(now=clock.now())
    assert (row("a100-01").gpus, row("a100-01").cpu, row("a100-01").memory) == (
        5,
        128000 - 1000,
        1024 * 1024 - 64 * 1024,
    )
    assert (row("a100-02").gpus, row("a100-03").gpus, row("a100-04").cpu) == (8, 6, 127000)
    pages = [r.query for r in cluster.seen("GET", "/api/v1/pods") if "fieldSelector" in r.query]
    assert [p.get("continue") is not None for p in pages] == [False, True]
    assert {p["limit"] for p in pages} == {"500"}
    assert {p["fieldSelector"] for p in pages} == {"spec.nodeName!="}
    # the server leaves this instance's own pods out of the list
    assert {p["labelSelector"] for p in pages} == {f"tidepool.io/instance!={k8s.kube.instance}"}


@pytest.mark.parametrize(
    ("fixture", "why"),
    [
        ("node-cordoned", "is cordoned"),
        ("node-noexecute", "is tainted dedicated=batch-team:NoExecute"),
        ("node-memory-pressure", "has MemoryPressure"),
        ("node-not-ready", "is not ready"),
    ],
    ids=["cordoned", "noexecute", "memory-pressure", "not-ready"],
)
def test_ineligible_nodes_get_no_new_pods(
    fixture: str,
    why: str,
    loop: Callable[..., None],  # noqa: F811
    train: Callable[..., Workload],  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
    k8s: KubernetesBackend,  # noqa: F811
    clock: ManualClock,
) -> None:
    only(cluster, (fixture, "bad-01", A100), ("node-gpu-taint", "good-01", A100))
    result = k8s.sync_nodes(now=clock.now())
    assert f"Node bad-01 {why}; it takes no new pods." in result.messages
    assert not row("bad-01").schedulable
    # the GPU taint of GKE and AKS GPU nodes is tolerated by Tidepool's pods
    assert row("good-01").schedulable
    job = train(replicas=2, gpu=4000)
    loop()
    loop()
    assert {p.node.name for p in job.pods.select_related("node") if p.node} == {"good-01"}
    assert {r.body["metadata"]["name"] for r in creates(cluster)} == {
        p.name for p in job.pods.all()
    }
    tolerations = creates(cluster)[0].body["spec"]["tolerations"]
    assert tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_time_slicing_and_mig_single_nodes_count_gpus_not_replicas_or_slices(
    k8s: KubernetesBackend,  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
    clock: ManualClock,
    demo: Any,
) -> None:
    mig_pool = node_pool_create(
        resource_pool=demo.node_pool.resource_pool, name="A100-80G-MIG-1g.5gb", gpu_model="1g.5gb"
    )
    only(
        cluster,
        ("node-time-slicing", "ts-01", A100),
        ("node-mig-single", "mig-01", A100),
        ("node-a100", "plain-01", A100),
    )
    k8s.sync_nodes(now=clock.now())
    shared, mig, plain = row("ts-01"), row("mig-01"), row("plain-01")
    # 32 nvidia.com/gpu advertised = 8 GPUs x 4 replicas
    assert (shared.gpus, shared.gpu_sharing, shared.gpu_replicas) == (8, "time-slicing", 4)
    # 56 slices of 1g.5gb, in their own pool: none of them is an A100-80G GPU
    assert (mig.node_pool, mig.gpus, mig.mig_profile, mig.gpu_sharing) == (
        mig_pool,
        56,
        "1g.5gb",
        "none",
    )
    assert (plain.gpus, plain.gpu_sharing) == (8, "none")
    a100 = Node.objects.filter(node_pool=demo.node_pool, schedulable=True)
    assert sum(n.gpus for n in a100) == 16


def test_a_fraction_goes_to_a_sharing_node_as_one_replica_and_whole_gpus_do_not(
    loop: Callable[..., None],  # noqa: F811
    train: Callable[..., Workload],  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
    k8s: KubernetesBackend,  # noqa: F811
    clock: ManualClock,
) -> None:
    only(cluster, ("node-time-slicing", "ts-01", A100), ("node-a100", "plain-01", A100))
    k8s.sync_nodes(now=clock.now())
    kubelet = Kubelet(cluster)
    half = train("half", replicas=1, gpu=500)
    wholes = [train(name, replicas=1, gpu=8000) for name in ("whole", "more")]
    loop()
    kubelet.sync()
    loop()
    pods = {p.workload.name: p for p in Pod.objects.select_related("node", "workload")}
    assert pods["half"].node and pods["half"].node.name == "ts-01"
    # a time-slice replica is not a GPU: whole GPUs never go to the sharing node, so only one
    # of the two 8-GPU jobs runs (on the plain node) and the other waits
    (placed,) = [pods[w.name] for w in wholes if w.name in pods]
    assert placed.node and placed.node.name == "plain-01"
    assert {w.status for w in Workload.objects.filter(pk__in=[w.pk for w in wholes])} == {
        Status.RUNNING,
        Status.QUEUED,
    }
    (post,) = [r for r in creates(cluster) if r.body["metadata"]["name"] == pods["half"].name]
    limits = post.body["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"  # one replica of the shared GPU
    assert {pods["half"].status, placed.status} == {PodStatus.RUNNING}  # the kubelet admitted
    half.refresh_from_db()
    assert half.status == Status.RUNNING


@pytest.fixture
def api(server: FakeApiServer, tmp_path: Any) -> Iterator[client.CoreV1Api]:  # noqa: F811
    """The real client, straight at the stand-in."""
    path = tmp_path / "kc"
    path.write_text(server.kubeconfig("t0ken"))
    yield client.CoreV1Api(api_client(KubeConfig(kubeconfig=str(path))))


def test_pods_name_tidepool_s_scheduler_and_are_bound_with_their_uid(
    loop: Callable[..., None],  # noqa: F811
    train: Callable[..., Workload],  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
    api: client.CoreV1Api,
) -> None:
    job = train(replicas=1)
    loop()
    (pod,) = job.pods.select_related("node")
    (create,) = creates(cluster)
    assert create.body["spec"]["schedulerName"] == "tidepool"
    assert "nodeName" not in create.body["spec"]
    (binding,) = cluster.seen("POST", "/binding")
    stored = cluster.pod(NAMESPACE, pod.name)
    assert binding.path == f"/api/v1/namespaces/{NAMESPACE}/pods/{pod.name}/binding"
    assert binding.body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.name, "uid": stored["metadata"]["uid"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": pod.node.name if pod.node else ""},
    }
    assert stored["spec"]["nodeName"] == (pod.node.name if pod.node else "")
    (event,) = [e for e in cluster.events if e["reason"] == "Scheduled"]
    assert event["message"] == f"Successfully assigned {NAMESPACE}/{pod.name} to {pod.node.name}"
    assert event["reportingComponent"] == "tidepool" and event["type"] == "Normal"
    assert event["involvedObject"]["uid"] == stored["metadata"]["uid"]


def test_the_stand_in_binds_like_the_api_server(
    cluster: FakeCluster,  # noqa: F811
    api: client.CoreV1Api,
) -> None:
    spec = {"schedulerName": "tidepool", "containers": [{"name": "c", "image": "x:1"}]}
    pod = cluster.put_pod({"metadata": {"name": "p", "namespace": NAMESPACE}, "spec": spec})
    Kubelet(cluster).sync()
    assert cluster.pod(NAMESPACE, "p")["status"]["phase"] == "Pending"  # unbound: no kubelet

    def bind(uid: str) -> None:
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name="p", uid=uid),
            target=client.V1ObjectReference(kind="Node", name="a100-01"),
        )
        api.create_namespaced_pod_binding("p", NAMESPACE, body, _preload_content=False)

    with pytest.raises(ApiException) as wrong:
        bind("not-its-uid")
    assert wrong.value.status == 409
    assert "does not match the UID in record" in json.loads(wrong.value.body)["message"]
    bind(pod["metadata"]["uid"])
    with pytest.raises(ApiException) as again:
        bind(pod["metadata"]["uid"])
    assert again.value.status == 409
    assert 'already assigned to node "a100-01"' in json.loads(again.value.body)["message"]
    Kubelet(cluster).sync()
    assert cluster.pod(NAMESPACE, "p")["status"]["phase"] == "Running"


def test_a_preempted_pod_gets_a_preempted_event(
    loop: Callable[..., None],  # noqa: F811
    train: Callable[..., Workload],  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
    k8s: KubernetesBackend,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
) -> None:
    job = train(replicas=1)
    loop()
    (pod,) = job.pods.all()
    pod.status, pod.reason = PodStatus.PREEMPTED, "Preempted by urgent (priority in Quota 1)"
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        k8s.delete_pod(pod, grace_seconds=30)
    (event,) = [e for e in cluster.events if e["reason"] == "Preempted"]
    assert event["message"] == "Preempted by urgent (priority in Quota 1)"
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == pod.name


def test_a_pod_whose_binding_failed_is_bound_at_the_next_sync(
    loop: Callable[..., None],  # noqa: F811
    train: Callable[..., Workload],  # noqa: F811
    cluster: FakeCluster,  # noqa: F811
) -> None:
    cluster.binding_failures = 4  # every try of one call (Api.retries): it gives up this sync
    job = train(replicas=1)
    loop()
    (pod,) = job.pods.select_related("node")
    assert "nodeName" not in cluster.pod(NAMESPACE, pod.name)["spec"]  # still unbound
    Kubelet(cluster).sync()
    assert cluster.pod(NAMESPACE, pod.name)["status"]["phase"] == "Pending"
    loop()
    assert cluster.pod(NAMESPACE, pod.name)["spec"]["nodeName"] == (
        pod.node.name if pod.node else ""
    )
    assert len(creates(cluster)) == 1 and len(cluster.seen("POST", "/binding")) == 4 + 1
