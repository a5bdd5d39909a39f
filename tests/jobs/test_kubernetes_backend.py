"""The Kubernetes backend driving the real `kubernetes` client against an API server.

The API server is a stand-in (`tests/jobs/k8s_fake.py`): no kube-apiserver can run on this
machine, as no registry serves one. It speaks the real REST paths and JSON shapes, so what is
asserted here is what the client sends and how the backend reads what a cluster answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import transaction

from cluster.models import Node
from console.clock import ManualClock
from jobs.backends import get_backend, set_backend
from jobs.backends.kubernetes import KubernetesBackend
from jobs.backends.kubernetes.manifest import selector
from jobs.choices import PodStatus, Status
from jobs.models import ClusterInstance, Pod, Workload
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.sync import backend_sync
from jobs.services.workloads import Shape, job_submit, service_create, workload_cancel
from quotas.models import QuotaResource
from tests.jobs.conftest import START
from tests.jobs.k8s_fake import FakeApiServer, FakeCluster

POOL = "tidepool.io/node-pool"
NAMESPACE = "tidepool-workspace-a"
IMAGE = "ghcr.io/acme/train:1"
FAILED = {"phase": "Failed"}


def terminated(code: int, reason: str) -> dict[str, Any]:
    """A Failed pod's status with its one container ended."""
    container = {
        "name": "main",
        "image": IMAGE,
        "imageID": f"{IMAGE}@sha256:0",
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "reason": reason}},
    }
    return {"phase": "Failed", "containerStatuses": [container]}


@pytest.fixture
def server(tmp_path: Path, settings: Any) -> Iterator[FakeApiServer]:
    """The stand-in API server with the demo's 16 A100 nodes, and settings pointing at it."""
    fake = FakeApiServer(FakeCluster())
    with fake as cluster:
        for i in range(1, 17):
            cluster.add_node(f"a100-{i:02d}", labels={POOL: "A100-80G"})
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(fake.kubeconfig("t0ken"))
        settings.TIDEPOOL_BACKEND = "kubernetes"
        settings.K8S_KUBECONFIG = str(kubeconfig)
        # No client-side pacing or long backoff in tests; the watch is as long as allowed least.
        settings.K8S_QPS, settings.K8S_BURST = 10000, 10000
        settings.K8S_BACKOFF_SECONDS, settings.K8S_WATCH_SECONDS = 0.01, 60
        yield fake


@pytest.fixture
def cluster(server: FakeApiServer) -> FakeCluster:
    """The stand-in cluster's state."""
    return server.cluster


@pytest.fixture
def k8s(server: FakeApiServer, demo: Any) -> Iterator[KubernetesBackend]:
    """The backend as the settings select it."""
    set_backend(None)
    backend = get_backend()
    assert isinstance(backend, KubernetesBackend)
    yield backend
    backend.close()
    set_backend(None)


def settle(backend: KubernetesBackend, cluster: FakeCluster) -> None:
    """Wait until the backend's watch has brought every event the stand-in sent it."""
    backend.refresh(now=START)
    wanted = cluster.latest(selector(backend.kube))
    deadline = time.monotonic() + 10
    # (a backend without a watch cache reads the cluster in observe: nothing to wait for)
    while hasattr(backend, "cache") and int(backend.cache.version or 0) < wanted:
        assert time.monotonic() < deadline, "the watch did not catch up"
        time.sleep(0.01)


def observe(backend: KubernetesBackend, cluster: FakeCluster, now: Any) -> list[Any]:
    """One observe once the watch has caught up with the stand-in."""
    settle(backend, cluster)
    return backend.observe(now=now)


@pytest.fixture
def loop(
    k8s: KubernetesBackend,
    cluster: FakeCluster,
    clock: ManualClock,
    django_capture_on_commit_callbacks: Any,
) -> Callable[..., None]:
    """One control-loop tick on the backend in force: a cycle decides, then a backend sync
    carries its decisions out and reads back what the cluster did. Commit callbacks run."""

    def tick(seconds: float = 5) -> None:
        clock.advance(seconds)
        with django_capture_on_commit_callbacks(execute=True):
            scheduling_cycle_run(now=clock.now())
        settle(k8s, cluster)
        with django_capture_on_commit_callbacks(execute=True):
            backend_sync(now=clock.now())

    return tick


@pytest.fixture
def train(alice: Any, demo: Any, clock: ManualClock) -> Callable[..., Workload]:
    """Alice submits a training job with an image."""

    def submit(name: str = "train", *, replicas: int = 2, gpu: int = 8000, **kw: Any) -> Workload:
        ws = demo.workspaces["workspace_a"]
        return job_submit(
            actor=alice,
            workspace=ws,
            quota=demo.quotas["Quota 1"],
            name=name,
            shape=Shape(replicas=replicas, gpu=gpu, cpu=kw.pop("cpu", 4000), memory=16384),
            node_pools=[demo.node_pool],
            image=kw.pop("image", IMAGE),
            command=kw.pop("command", "python train.py --epochs 3"),
            now=clock.now(),
            **kw,
        )

    return submit


def creates(cluster: FakeCluster) -> list[Any]:
    """The pod creations the server answered (not bindings or events)."""
    return [r for r in cluster.seen("POST") if r.path.endswith("/pods")]


def posted(cluster: FakeCluster, name: str) -> list[dict[str, Any]]:
    """The bodies of the creations of the pod with this name."""
    return [r.body for r in creates(cluster) if r.body["metadata"]["name"] == name]


def namespace(workload: Workload) -> str:
    """Where the workload's pods run: tidepool-<workspace>, DNS-safe."""
    return "tidepool-" + workload.workspace.name.replace("_", "-")


def running(cluster: FakeCluster, workload: Workload) -> None:
    """The kubelet starts every pod of the workload."""
    for pod in workload.pods.all():
        cluster.set_status(namespace(workload), pod.name, phase="Running")


def test_settings_select_the_backend_and_its_kubeconfig(
    k8s: KubernetesBackend, cluster: FakeCluster, clock: ManualClock
) -> None:
    assert observe(k8s, cluster, clock.now()) == []
    node_lists = cluster.seen("GET", "/api/v1/nodes")
    assert node_lists and node_lists[0].authorization == "Bearer t0ken"


def test_an_unknown_backend_is_refused_naming_the_setting(settings: Any) -> None:
    settings.TIDEPOOL_BACKEND = "nomad"
    set_backend(None)
    with pytest.raises(ImproperlyConfigured, match="TIDEPOOL_BACKEND 'nomad'.*'kubernetes'"):
        get_backend()


def test_a_kubeconfig_path_that_is_no_file_is_refused(settings: Any) -> None:
    settings.TIDEPOOL_BACKEND = "kubernetes"
    settings.K8S_KUBECONFIG = "/nowhere/kubeconfig"
    set_backend(None)
    with pytest.raises(ImproperlyConfigured, match="KUBECONFIG '/nowhere/kubeconfig' names no"):
        get_backend()


def test_kubernetes_without_kubeconfig_outside_a_cluster_says_what_to_set(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.TIDEPOOL_BACKEND = "kubernetes"
    settings.K8S_KUBECONFIG = ""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    set_backend(None)
    with pytest.raises(ImproperlyConfigured, match="needs KUBECONFIG"):
        get_backend()


def test_admission_creates_one_labelled_pod_per_replica_for_tidepool_s_scheduler(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    job = train()
    loop()
    posts = creates(cluster)
    assert {p.path for p in posts} == {f"/api/v1/namespaces/{NAMESPACE}/pods"}
    rows = {p.name: p for p in job.pods.select_related("node")}
    assert len(posts) == 2 and {p.body["metadata"]["name"] for p in posts} == set(rows)
    for post in posts:
        body, row = post.body, rows[post.body["metadata"]["name"]]
        assert body["metadata"]["namespace"] == NAMESPACE
        # no node yet: kube-scheduler leaves it to Tidepool, which binds it (test_kubelet)
        assert "nodeName" not in body["spec"] and body["spec"]["schedulerName"] == "tidepool"
        assert cluster.pod(NAMESPACE, row.name)["spec"]["nodeName"] == row.node.name
        assert body["spec"]["restartPolicy"] == "Never"
        assert body["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "tidepool",
            "tidepool.io/instance": ClusterInstance.objects.get().instance,
            "tidepool.io/workload-id": str(job.pk),
            "tidepool.io/replica": str(row.index),
            "tidepool.io/attempt": "0",
            "tidepool.io/kind": "training",
            "tidepool.io/pod-id": str(row.pk),
        }
        (container,) = body["spec"]["containers"]
        wanted = {"nvidia.com/gpu": "8", "cpu": "4000m", "memory": "16384Mi"}
        assert container["resources"] == {"requests": wanted, "limits": wanted}
        assert container["image"] == IMAGE
        assert container["command"] == ["/bin/sh", "-c", "python train.py --epochs 3"]


def test_a_rolled_back_cycle_starts_no_pod(
    k8s: KubernetesBackend,
    train: Callable[..., Workload],
    cluster: FakeCluster,
    clock: ManualClock,
    django_capture_on_commit_callbacks: Any,
) -> None:
    train()

    class Abort(Exception):
        """Something after the cycle fails: its transaction rolls back."""

    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(Abort),
        transaction.atomic(),
    ):
        scheduling_cycle_run(now=clock.now(), backend=k8s)
        raise Abort
    observe(k8s, cluster, clock.now())
    assert creates(cluster) == []


def test_pod_phases_become_replica_status_once(
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    clock: ManualClock,
) -> None:
    job = train()
    loop()
    running(cluster, job)
    reports = observe(k8s, cluster, clock.now())
    assert sorted((r.pod_id, r.phase) for r in reports) == sorted(
        (pk, PodStatus.RUNNING) for pk in job.pods.values_list("pk", flat=True)
    )
    loop()
    assert set(job.pods.values_list("status", flat=True)) == {PodStatus.RUNNING}
    assert observe(k8s, cluster, clock.now()) == []  # nothing changed since


def test_an_oom_killed_replica_is_reported_with_its_exit_code_and_the_job_requeues(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    job = train()
    loop()
    running(cluster, job)
    loop()
    first = job.pods.order_by("index").first()
    assert first is not None
    cluster.set_status(NAMESPACE, first.name, **terminated(137, "OOMKilled"))
    loop(0)
    first.refresh_from_db()
    job.refresh_from_db()
    assert (first.exit_code, first.reason) == (137, "OOMKilled: out of memory (exit code 137)")
    restarted = job.events.get(kind="restarted").message
    assert job.failures == 1 and restarted.startswith("Replica 0 failed: OOMKilled")


def test_a_cancelled_job_s_pods_are_deleted_with_a_grace_period(
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    alice: Any,
    clock: ManualClock,
    django_capture_on_commit_callbacks: Any,
) -> None:
    job = train()
    loop()
    running(cluster, job)
    loop()
    uids = {p.name: cluster.pod(NAMESPACE, p.name)["metadata"]["uid"] for p in job.pods.all()}
    with django_capture_on_commit_callbacks(execute=True):
        workload_cancel(actor=alice, workload=job, now=clock.now())
    deletes = cluster.seen("DELETE")
    assert {d.path.rsplit("/", 1)[1] for d in deletes} == set(uids)
    for d in deletes:
        name = d.path.rsplit("/", 1)[1]
        assert d.body == {"gracePeriodSeconds": 30, "preconditions": {"uid": uids[name]}}
    loop()  # still terminating: not deleted again
    assert len(cluster.seen("DELETE")) == 2


@pytest.mark.parametrize("cycle_deletes", [True, False], ids=["by-the-cycle", "by-reconcile"])
def test_preempted_pods_get_a_grace_period_and_their_node_waits_for_them(
    cycle_deletes: bool,
    loop: Callable[..., None],
    submit: Callable[..., Workload],
    train: Callable[..., Workload],
    bob: Any,
    carol: Any,
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    clock: ManualClock,
    django_capture_on_commit_callbacks: Any,
) -> None:
    victims = [
        submit(bob, "b-train", replicas=6, image=IMAGE),
        submit(carol, "c-train", replicas=10, image=IMAGE),
    ]  # 128 GPUs: the cluster is full
    loop()
    for victim in victims:
        running(cluster, victim)
    loop()
    urgent = train("urgent", replicas=1)  # Quota 1 takes GPUs back from its children
    # Without its commit callbacks the cycle's deletions are lost, as if its process died:
    # the backend sync then sees victims that no row wants on the urgent job's node.
    with django_capture_on_commit_callbacks(execute=cycle_deletes):
        scheduling_cycle_run(now=clock.now(), backend=k8s)
    assert bool(cluster.seen("DELETE")) == cycle_deletes
    backend_sync(now=clock.now(), backend=k8s)

    preempted = {p.name: p for p in Pod.objects.filter(status=PodStatus.PREEMPTED)}
    deletes = {d.path.rsplit("/", 1)[1]: d.body for d in cluster.seen("DELETE")}
    assert preempted and set(deletes) == set(preempted)
    assert {body["gracePeriodSeconds"] for body in deletes.values()} == {30}
    # The victims are still checkpointing: the urgent pod is not bound to their node yet.
    (pod,) = urgent.pods.select_related("node")
    assert pod.status == PodStatus.PENDING and posted(cluster, pod.name) == []

    for name, victim in preempted.items():
        if victim.node_id == pod.node_id:
            cluster.vanish(namespace(victim.workload), name)
    loop()
    assert len(posted(cluster, pod.name)) == 1
    assert cluster.pod(namespace(urgent), pod.name)["spec"]["nodeName"] == pod.node.name


def _foreign(name: str, labels: dict[str, str]) -> dict[str, Any]:
    meta = {"name": name, "namespace": NAMESPACE, "labels": labels}
    spec = {"containers": [{"name": "x", "image": "busybox"}]}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def test_pods_it_does_not_own_are_never_touched(
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    alice: Any,
    clock: ManualClock,
    django_capture_on_commit_callbacks: Any,
) -> None:
    cluster.put_pod(_foreign("tp-999-0-0", {}))
    cluster.put_pod(
        _foreign(
            "tp-998-0-0",
            {"app.kubernetes.io/managed-by": "tidepool", "tidepool.io/instance": "staging"},
        )
    )
    job = train(replicas=1)
    # Someone else's pod already has the name this replica's pod will get.
    cluster.put_pod(_foreign(f"tp-{job.pk}-0-0", {"app": "mine"}))
    loop()
    loop()
    pod = job.pods.get(index=0, attempt=0)
    assert pod.status == PodStatus.FAILED
    assert "already exists in tidepool-workspace-a and is not ours" in pod.reason
    with django_capture_on_commit_callbacks(execute=True):
        workload_cancel(actor=alice, workload=Workload.objects.get(pk=job.pk), now=clock.now())
    loop()
    foreign = {"tp-999-0-0", "tp-998-0-0", f"tp-{job.pk}-0-0"}
    deleted = {d.path.rsplit("/", 1)[1] for d in cluster.seen("DELETE")}
    assert deleted and not deleted & foreign  # its own restarted replica only
    for name in foreign:
        assert "deletionTimestamp" not in cluster.pod(NAMESPACE, name)["metadata"]


@pytest.mark.parametrize("ours_seen_first", [False, True], ids=["never-created", "replaced"])
def test_stopping_a_replica_never_deletes_someone_else_s_pod_of_its_name(
    ours_seen_first: bool,
    k8s: KubernetesBackend,
    train: Callable[..., Workload],
    cluster: FakeCluster,
    alice: Any,
    clock: ManualClock,
    django_capture_on_commit_callbacks: Any,
) -> None:
    job = train(replicas=1)
    scheduling_cycle_run(now=clock.now(), backend=k8s)
    (pod,) = job.pods.all()
    if ours_seen_first:
        observe(k8s, cluster, clock.now())  # creates the pod
        cluster.vanish(NAMESPACE, pod.name)  # the backend has not watched since
    cluster.put_pod(_foreign(pod.name, {"app": "mine"}))
    with django_capture_on_commit_callbacks(execute=True):
        workload_cancel(actor=alice, workload=job, now=clock.now())
    assert "deletionTimestamp" not in cluster.pod(NAMESPACE, pod.name)["metadata"]
    # A pod it saw is deleted by uid, which the API refuses for the newcomer.
    assert len(cluster.seen("DELETE")) == int(ours_seen_first)


def test_a_pending_replica_whose_pod_went_missing_is_created_again(
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    clock: ManualClock,
) -> None:
    job = train(replicas=1)
    loop()
    (pod,) = job.pods.all()
    cluster.strip_finalizers(NAMESPACE, pod.name)  # someone deletes it outright
    cluster.vanish(NAMESPACE, pod.name)
    assert observe(k8s, cluster, clock.now()) == []
    assert [p.body["metadata"]["name"] for p in creates(cluster)] == [pod.name, pod.name]
    assert (NAMESPACE, pod.name) in cluster.pods


@pytest.mark.parametrize(
    ("node", "node_lost", "reason"),
    [
        ("gone", True, "Node lost: a100-"),
        ("drained", True, "Node drained: a100-"),
        ("fine", False, "Pod deleted outside Tidepool"),
    ],
    ids=["with-its-node", "by-a-drain", "by-someone-else"],
)
def test_a_running_replica_whose_pod_vanished_is_reported_failed(
    node: str,
    node_lost: bool,
    reason: str,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    clock: ManualClock,
) -> None:
    job = train(replicas=1)
    loop()
    running(cluster, job)
    loop()
    (pod,) = job.pods.select_related("node")
    if node == "gone":
        del cluster.nodes[pod.node.name]
    elif node == "drained":
        cluster.add_node(pod.node.name, labels={POOL: "A100-80G"}, unschedulable=True)
    cluster.strip_finalizers(NAMESPACE, pod.name)  # deleted outright, outcome unknown
    cluster.vanish(NAMESPACE, pod.name)
    (report,) = observe(k8s, cluster, clock.now())
    assert (report.pod_id, report.phase, report.node_lost) == (pod.pk, PodStatus.FAILED, node_lost)
    assert report.reason.startswith(reason)


def test_a_replica_without_an_image_fails_without_asking_the_cluster(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    job = train(replicas=1, image="", fault_tolerance=False)
    loop()
    loop()
    job.refresh_from_db()
    assert creates(cluster) == []
    assert job.status == Status.FAILED
    assert "train has no container image; Kubernetes needs one" in job.status_reason


def test_a_service_the_cluster_refuses_fails_instead_of_restarting_forever(
    loop: Callable[..., None], alice: Any, demo: Any, clock: ManualClock, cluster: FakeCluster
) -> None:
    service = service_create(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="no-image",
        shape=Shape(replicas=1, gpu=8000, cpu=4000, memory=16384),
        node_pools=[demo.node_pool],
        now=clock.now(),
    )
    for _ in range(4):
        loop()
    service.refresh_from_db()
    assert creates(cluster) == []
    assert service.status == Status.FAILED and service.restarts == 0
    assert "the cluster will not run it as asked, so no restart is tried" in service.status_reason


def test_a_missing_namespace_holds_the_replica_with_the_api_s_words(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    cluster.namespaces = {"default"}
    job = train(replicas=1, fault_tolerance=False)
    loop()
    loop()
    job.refresh_from_db()
    (pod,) = job.pods.all()
    assert job.status == Status.RUNNING and pod.status == PodStatus.PENDING
    assert f'namespaces "{NAMESPACE}" not found' in pod.reason
    cluster.namespaces = None  # an admin creates it: the next try (after 30 s) succeeds
    loop(31)
    assert (NAMESPACE, pod.name) in cluster.pods


def test_a_fraction_of_a_gpu_waits_for_a_node_that_shares_gpus(
    settings: Any,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    clock: ManualClock,
) -> None:
    k8s.sync_nodes(now=clock.now())  # the node rows say how the cluster shares GPUs: not at all
    half = train("half", replicas=1, gpu=500)
    loop()
    loop()
    half.refresh_from_db()
    # No node shares its GPUs: the core places the fraction nowhere, and nothing is refused.
    assert half.status == Status.QUEUED and creates(cluster) == []
    assert "no node in pool A100-80G shares its GPUs" in half.pending_reason

    settings.K8S_SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
    settings.K8S_GPU_SLICES = 4
    backend = KubernetesBackend.from_settings()
    set_backend(backend)
    for node in cluster.nodes.values():
        node["status"]["allocatable"]["nvidia.com/gpu.shared"] = "32"
    backend.sync_nodes(now=clock.now())
    loop()
    (post,) = creates(cluster)
    limits = post.body["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu.shared": "2", "cpu": "4000m", "memory": "16384Mi"}


def node_row(name: str) -> Node:
    return Node.objects.get(name=name)


def test_node_sync_adds_labelled_nodes_and_cordons_the_unready_and_the_gone(
    k8s: KubernetesBackend, cluster: FakeCluster, clock: ManualClock, demo: Any
) -> None:
    cluster.add_node("a100-17", labels={POOL: "A100-80G"}, cpu="96", memory="512Gi")
    cluster.add_node("t4-01", labels={POOL: "T4"})
    cluster.add_node("cpu-01", labels={})
    cluster.add_node("a100-02", labels={POOL: "A100-80G"}, ready=False)
    cluster.add_node("a100-03", labels={POOL: "A100-80G"}, unschedulable=True)
    del cluster.nodes["a100-04"]
    minimum = list(QuotaResource.objects.values_list("min_gpu", flat=True))

    result = k8s.sync_nodes(now=clock.now())

    new = node_row("a100-17")
    assert (new.node_pool, new.gpus, new.cpu, new.memory) == (demo.node_pool, 8, 96000, 524288)
    assert not Node.objects.filter(name__in=["t4-01", "cpu-01"]).exists()
    assert sorted(result.cordoned) == ["a100-02", "a100-03", "a100-04"]
    assert not any(node_row(n).schedulable for n in ("a100-02", "a100-03", "a100-04"))
    assert "Node a100-02 is not ready; it takes no new pods." in result.messages
    assert any(
        "Node t4-01: node pool 'T4' (label tidepool.io/node-pool) does not exist" in m
        for m in result.messages
    )
    assert (
        "Node pool A100-80G now has 112 GPUs schedulable, below the 128 GPUs"
        in (result.messages[-1])
    )
    assert list(QuotaResource.objects.values_list("min_gpu", flat=True)) == minimum

    cluster.add_node("a100-02", labels={POOL: "A100-80G"})
    assert "a100-02" in k8s.sync_nodes(now=clock.now()).updated
    assert node_row("a100-02").schedulable


def test_a_cluster_without_pool_labels_cordons_nothing(
    k8s: KubernetesBackend, cluster: FakeCluster, clock: ManualClock, settings: Any
) -> None:
    settings.K8S_NODE_POOL_LABEL = "example.com/pool"
    result = KubernetesBackend.from_settings().sync_nodes(now=clock.now())
    assert result.cordoned == [] and Node.objects.filter(schedulable=True).count() == 16
    assert "no node labelled example.com/pool" in result.messages[0]


def test_node_capacity_never_drops_below_what_running_replicas_hold(
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    clock: ManualClock,
) -> None:
    job = train(replicas=1)
    loop()
    (pod,) = job.pods.select_related("node")
    cluster.add_node(pod.node.name, labels={POOL: "A100-80G"}, gpus="0")
    result = k8s.sync_nodes(now=clock.now())
    assert node_row(pod.node.name).gpus == 8
    assert f"Node {pod.node.name} reports 0 gpus allocatable, but its replicas hold 8" in (
        " ".join(result.messages)
    )


def test_observe_syncs_nodes_once_a_minute(
    k8s: KubernetesBackend, cluster: FakeCluster, clock: ManualClock
) -> None:
    cluster.add_node("a100-17", labels={POOL: "A100-80G"})
    observe(k8s, cluster, clock.now())
    assert Node.objects.filter(name="a100-17").exists()
    k8s.observe(now=clock.advance(30))
    assert len(cluster.seen("GET", "/api/v1/nodes")) == 1
    k8s.observe(now=clock.advance(30))
    assert len(cluster.seen("GET", "/api/v1/nodes")) == 2


def test_the_sync_command_reports_what_it_changed(
    server: FakeApiServer, demo: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server.cluster.add_node("a100-17", labels={POOL: "A100-80G"})
    call_command("kube_sync_nodes")
    assert "Added: a100-17" in capsys.readouterr().out
    assert node_row("a100-17").node_pool == demo.node_pool
    call_command("kube_sync_nodes")
    assert "Nodes already match the cluster." in capsys.readouterr().out


@pytest.mark.parametrize("pod_exists", [False, True], ids=["not-yet-created", "created"])
def test_a_live_row_of_an_ended_workload_gets_no_pod_and_loses_the_one_it_has(
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    clock: ManualClock,
    pod_exists: bool,
) -> None:
    """Even a pod row left Pending on a workload that ended (a state the write lock rules
    out, written here by hand) never becomes a pod, and its pod, if any, is deleted."""
    job = train(replicas=1)
    with transaction.atomic():
        scheduling_cycle_run(now=clock.now())  # the row is Pending; the pod comes at observe
    if pod_exists:
        observe(k8s, cluster, clock.now())
    (pod,) = job.pods.all()
    Workload.objects.filter(pk=job.pk).update(status=Status.CANCELLED)
    assert pod.status == PodStatus.PENDING
    observe(k8s, cluster, clock.now())
    assert len(posted(cluster, pod.name)) == (1 if pod_exists else 0)
    deletes = [d.path for d in cluster.seen("DELETE")]
    assert deletes == ([f"/api/v1/namespaces/{NAMESPACE}/pods/{pod.name}"] if pod_exists else [])
