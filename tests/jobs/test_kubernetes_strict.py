"""The Kubernetes backend against a stand-in as strict as the real API server.

Each case is one way a real cluster behaves that the first backend mishandled: watches that
expire or break, paginated lists whose continue token expires, refusals (403, 404, 409, 422,
429, 5xx), finalizers, drains, PodGC, pods stuck terminating or never starting, a token
without cluster-wide rights, and a database that does not know the pods it finds.
"""

# ruff: noqa: F811 - the fixtures of test_kubernetes_backend are imported by name
from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from kubernetes import client

from console.clock import ManualClock
from jobs.backends import set_backend
from jobs.backends.kubernetes import KubernetesBackend
from jobs.backends.kubernetes.manifest import selector
from jobs.choices import PodStatus, Status
from jobs.models import ClusterInstance, Workload
from jobs.services.sync import backend_sync
from tests.jobs.k8s_fake import FakeApiServer, FakeCluster, recorded, validate
from tests.jobs.test_kubernetes_backend import (  # noqa: F401 - fixtures
    IMAGE,
    NAMESPACE,
    cluster,
    creates,
    k8s,
    loop,
    observe,
    running,
    server,
    settle,
    train,
)
from tests.test_settings import _manage


def _get(cluster: FakeCluster, path: str) -> list[dict[str, Any]]:
    """The lines of a raw GET (a watch's events)."""
    with urllib.request.urlopen(cluster.url + path, timeout=10) as answer:
        return [json.loads(line) for line in answer.read().splitlines() if line.strip()]


def _owned(kube_instance: str, workload: int, index: int, pod_id: int = 0) -> dict[str, Any]:
    """An owned pod as another process of this Tidepool would have created it."""
    labels = {
        "app.kubernetes.io/managed-by": "tidepool",
        "tidepool.io/instance": kube_instance,
        "tidepool.io/workload-id": str(workload),
        "tidepool.io/replica": str(index),
        "tidepool.io/attempt": "0",
        "tidepool.io/pod-id": str(pod_id),
    }
    meta = {"name": f"tp-{workload}-{index}-0", "namespace": NAMESPACE, "labels": labels}
    spec = {"nodeName": "a100-01", "containers": [{"name": "main", "image": IMAGE}]}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def _lists(cluster: FakeCluster) -> int:
    """Full lists of owned pods asked for (first pages; watches, continue pages and the node
    sync's list of every bound pod aside)."""
    pods = cluster.seen("GET", "/api/v1/pods")
    return sum(
        1
        for r in pods
        if not r.query.get("watch") and "continue" not in r.query and "fieldSelector" not in r.query
    )


def _job_running(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster, **kw: Any
) -> Workload:
    job = train(replicas=1, **kw)
    loop()
    running(cluster, job)
    loop()
    job.refresh_from_db()
    assert job.status == Status.RUNNING
    return job


# The stand-in itself.


def test_no_bookmark_for_a_watch_shorter_than_3_seconds(cluster: FakeCluster) -> None:
    since = cluster.version
    short = _get(
        cluster,
        f"/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion={since}",
    )
    long = _get(
        cluster,
        f"/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion={since}",
    )
    assert short == [] and [e["type"] for e in long] == ["BOOKMARK"]


def test_a_paginated_list_at_a_compacted_version_is_gone(cluster: FakeCluster) -> None:
    old = cluster.version
    cluster.add_node("a100-99", labels={})
    cluster.compact()
    with pytest.raises(urllib.error.HTTPError) as gone:
        _get(cluster, f"/api/v1/pods?limit=500&resourceVersion={old}")
    assert gone.value.code == 410


def test_the_stand_in_validates_pods_as_the_real_server() -> None:
    body = recorded("pod_created")
    assert validate(body) == []
    body["metadata"]["name"] = "Bad_Name"
    body["spec"]["containers"][0]["image"] = ""
    body["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    errors = validate(body)
    assert errors[0].startswith("metadata.name: Invalid value: 'Bad_Name'")
    assert "spec.containers[0].image: Required value" in errors
    assert any("must be equal to nvidia.com/gpu limit" in e for e in errors)


def test_a_recorded_list_page_reads_as_one_owned_running_pod() -> None:
    from jobs.backends.kubernetes.watch import pod_state

    page = recorded("podlist_page")
    (state,) = [pod_state(obj) for obj in page["items"]]
    assert page["metadata"]["continue"] and state.key == (41, 0, 0)
    assert (state.seen.phase, state.tracked, state.node) == ("Running", True, "a100-01")


# Watches.


def test_a_410_error_event_mid_stream_lists_again_and_misses_nothing(
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    clock: ManualClock,
) -> None:
    job = train()
    loop()
    assert _lists(cluster) == 1
    cluster.compact()
    running(cluster, job)  # events this watch may not have delivered
    cluster.break_watches("gone")
    settle(k8s, cluster)
    loop()
    job.refresh_from_db()
    assert _lists(cluster) == 2 and job.status == Status.RUNNING


def test_a_watch_answering_http_410_lists_again(
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
) -> None:
    cluster.gone_as_http_status = True
    job = train()
    loop()
    cluster.compact()
    cluster.break_watches("reset")  # the next watch starts from a compacted version
    running(cluster, job)
    loop()
    job.refresh_from_db()
    assert _lists(cluster) == 2 and job.status == Status.RUNNING


@pytest.mark.parametrize("how", ["reset", "truncate"])
def test_a_broken_stream_resumes_from_its_last_version_without_listing(
    how: str,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
) -> None:
    job = train()
    loop()
    settle(k8s, cluster)  # the watch has seen the latest version before its stream breaks
    at = str(cluster.latest(selector(k8s.kube)))
    cluster.break_watches(how)
    running(cluster, job)
    loop()
    job.refresh_from_db()
    assert job.status == Status.RUNNING and _lists(cluster) == 1
    watches = [r.query for r in cluster.seen("GET", "/api/v1/pods") if r.query.get("watch")]
    assert at in [w["resourceVersion"] for w in watches[1:]]
    assert all(w["timeoutSeconds"] == "60" and w["allowWatchBookmarks"] == "true" for w in watches)


def test_1250_pods_list_in_pages_of_500_and_an_expired_continue_starts_over(
    server: FakeApiServer, cluster: FakeCluster, k8s: KubernetesBackend, clock: ManualClock
) -> None:
    instance = k8s.kube.instance
    for i in range(1250):
        cluster.put_pod(_owned(instance, 900000 + i, 0))
    # The token of the first page expires before the second is asked for.
    cluster.inject("GET", "/api/v1/pods", 0, query_part="continue=", compact=True)
    k8s.refresh(now=clock.now())
    lists = [
        r.query
        for r in cluster.seen("GET", "/api/v1/pods")
        if not r.query.get("watch") and "fieldSelector" not in r.query
    ]
    assert [("continue" in q, q["limit"]) for q in lists] == [
        (False, "500"),
        (True, "500"),  # 410: the token expired
        (False, "500"),
        (True, "500"),
        (True, "500"),
    ]
    assert len(k8s.cache.snapshot()) == 1250


def test_a_namespaced_token_is_a_configuration_error_naming_the_permission(
    server: FakeApiServer, cluster: FakeCluster, k8s: KubernetesBackend, clock: ManualClock
) -> None:
    cluster.namespaced_tokens["t0ken"] = NAMESPACE
    with pytest.raises(ImproperlyConfigured, match="list and watch on pods") as refused:
        k8s.refresh(now=clock.now())
    assert 'cannot list resource "pods" in API group "" at the cluster scope' in str(refused.value)


# Refusals on create.


def test_a_create_that_timed_out_is_adopted_as_the_one_pod(
    settings: Any,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
) -> None:
    k8s.api.request_seconds = 0.5
    cluster.inject("POST", "/pods", 0, delay=1.0)  # created, but the answer comes too late
    job = train(replicas=1)
    loop()
    loop()
    (pod,) = job.pods.all()
    assert [p for p in cluster.pods if p[1].startswith(f"tp-{job.pk}-")] == [(NAMESPACE, pod.name)]
    assert len(creates(cluster)) == 2  # the retry met 409 AlreadyExists
    pod.refresh_from_db()
    assert pod.status == PodStatus.PENDING and pod.reason == ""


def test_a_422_is_a_final_refusal_quoting_the_api(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    message = 'Pod "x" is invalid: spec.containers[0].resources.requests: Invalid value'
    cluster.inject("POST", "/pods", 422, reason="Invalid", message=message)
    job = train(replicas=1)
    loop()
    loop()
    job.refresh_from_db()
    assert job.status == Status.FAILED and job.restarts == 0
    assert f"Kubernetes refused the pod: {message}" in job.status_reason


def test_a_quota_403_holds_the_replica_pending_with_the_reason(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    message = 'pods "x" is forbidden: exceeded quota: gpu, requested: nvidia.com/gpu=8'
    cluster.inject("POST", "/pods", 403, reason="Forbidden", message=message)
    job = train(replicas=1)
    loop()
    loop()
    job.refresh_from_db()
    (pod,) = job.pods.all()
    assert job.status == Status.RUNNING and pod.status == PodStatus.PENDING
    assert message in pod.reason


@pytest.mark.parametrize(
    ("code", "headers"), [(429, {"Retry-After": "0.2"}), (503, {})], ids=["429", "503"]
)
def test_throttling_and_server_errors_are_retried_until_the_pod_is_made(
    code: int,
    headers: dict[str, str],
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
) -> None:
    cluster.inject("POST", "/pods", code, times=2, headers=headers)
    job = train(replicas=1)
    loop()
    (pod,) = job.pods.all()
    assert len(creates(cluster)) == 3 and (NAMESPACE, pod.name) in cluster.pods


# Terminal states, disruptions, deadlines.


@pytest.mark.parametrize("finalizer_kept", [True, False], ids=["finalizer", "tombstone"])
def test_a_succeeded_pod_deleted_before_the_next_sync_is_reported_succeeded(
    finalizer_kept: bool,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
) -> None:
    job = _job_running(loop, train, cluster)
    (pod,) = job.pods.all()
    cluster.set_status(NAMESPACE, pod.name, phase="Succeeded")
    if not finalizer_kept:
        cluster.strip_finalizers(NAMESPACE, pod.name)
    cluster.vanish(NAMESPACE, pod.name)
    loop()
    job.refresh_from_db()
    assert job.status == Status.SUCCEEDED and job.failures == 0
    loop()  # recorded: the finalizer goes, and with it the deleted pod
    assert (NAMESPACE, pod.name) not in cluster.pods


def test_finished_pods_are_kept_for_the_retention_period_then_deleted(
    settings: Any,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
) -> None:
    job = _job_running(loop, train, cluster)
    (pod,) = job.pods.all()
    cluster.set_status(NAMESPACE, pod.name, phase="Succeeded")
    loop()
    loop(60)
    assert "finalizers" not in cluster.pod(NAMESPACE, pod.name)["metadata"]
    loop(3600)
    assert (NAMESPACE, pod.name) not in cluster.pods


def test_a_drain_is_a_disruption_that_charges_no_failure(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    job = _job_running(loop, train, cluster, max_restarts=1)
    (pod,) = job.pods.select_related("node")
    cluster.drain(pod.node.name)
    cluster.finish(NAMESPACE, pod.name)  # the kubelet ends it within its grace
    loop()
    job.refresh_from_db()
    assert job.status == Status.REQUEUED and job.failures == 0 and job.restarts == 1
    fault = job.events.get(kind="fault").message
    assert "EvictionByEvictionAPI" in fault and "disrupted" in fault


def test_a_deleted_node_s_pods_are_garbage_collected_as_a_disruption(
    loop: Callable[..., None], train: Callable[..., Workload], cluster: FakeCluster
) -> None:
    job = _job_running(loop, train, cluster)
    (pod,) = job.pods.select_related("node")
    cluster.delete_node(pod.node.name)
    loop()
    job.refresh_from_db()
    assert job.status == Status.REQUEUED and job.failures == 0
    assert "DeletionByPodGC" in job.events.get(kind="fault").message


def test_a_pod_stuck_terminating_is_replaced_and_force_deleted(
    settings: Any,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
) -> None:
    job = _job_running(loop, train, cluster)
    (pod,) = job.pods.all()
    cluster.handle("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod.name}", {})
    loop()
    assert cluster.pod(NAMESPACE, pod.name)["metadata"]["deletionTimestamp"]
    job.refresh_from_db()
    assert job.status == Status.RUNNING  # terminating, within its deadline
    loop(settings.K8S_TERMINATING_SECONDS)
    job.refresh_from_db()
    assert job.status == Status.REQUEUED and "Stuck terminating" in job.status_reason
    loop()
    assert (NAMESPACE, pod.name) not in cluster.pods


def test_an_image_that_cannot_be_pulled_fails_only_after_its_grace(
    settings: Any,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
) -> None:
    job = train(replicas=1, fault_tolerance=False)
    loop()
    (pod,) = job.pods.all()
    waiting = {"reason": "ErrImagePull", "message": "pull access denied"}
    containers = [{"name": "main", "state": {"waiting": waiting}}]
    cluster.set_status(NAMESPACE, pod.name, containerStatuses=containers)
    loop()
    pod.refresh_from_db()
    assert pod.status == PodStatus.PENDING
    loop(settings.K8S_IMAGE_PULL_GRACE_SECONDS)
    job.refresh_from_db()
    assert job.status == Status.FAILED and "ErrImagePull: pull access denied" in job.status_reason


# Ownership.


def test_an_empty_database_deletes_none_of_the_owned_pods_and_says_why(
    k8s: KubernetesBackend,
    cluster: FakeCluster,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for i in range(5):
        cluster.put_pod(_owned(k8s.kube.instance, 777, i))
    with caplog.at_level(logging.ERROR):
        observe(k8s, cluster, clock.now())
    assert cluster.seen("DELETE") == []
    assert "has no pod rows, yet 5 pods carry its instance id" in caplog.text


def test_deletions_are_capped_per_sync(
    settings: Any,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    alice: Any,
    clock: ManualClock,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from jobs.services.workloads import workload_cancel

    job = _job_running(loop, train, cluster)
    k8s.kube = k8s.kube.__class__(**{**k8s.kube.__dict__, "max_deletes": 2})
    extra = [_owned(k8s.kube.instance, 555000 + i, 0) for i in range(4)]
    for obj in extra:
        cluster.put_pod(obj)
    loop()
    assert cluster.seen("DELETE") == []  # no row stands for them
    (pod,) = job.pods.all()
    with django_capture_on_commit_callbacks(execute=False):  # the stop's delete is lost
        workload_cancel(actor=alice, workload=Workload.objects.get(pk=job.pk), now=clock.now())
    loop()
    assert [d.path.rsplit("/", 1)[1] for d in cluster.seen("DELETE")] == [pod.name]


def test_the_instance_id_is_the_database_s_own(k8s: KubernetesBackend) -> None:
    assert k8s.kube.instance == ClusterInstance.objects.get().instance
    assert k8s.kube.instance.startswith("tp-") and len(k8s.kube.instance) == 13
    assert selector(k8s.kube).endswith(f"tidepool.io/instance={k8s.kube.instance}")


def test_production_refuses_the_old_shared_instance_id() -> None:
    result = _manage(
        "check",
        DJANGO_SETTINGS_MODULE="console.settings.production",
        SECRET_KEY="x" * 50,
        TIDEPOOL_K8S_INSTANCE="tidepool",
    )
    assert result.returncode != 0
    assert "TIDEPOOL_K8S_INSTANCE is 'tidepool', the old shared default" in result.stderr


def test_sync_reports_each_event_once_across_two_backends(
    server: FakeApiServer,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
    clock: ManualClock,
) -> None:
    """Two processes' backends on one stand-in and one database apply each change once."""
    other = KubernetesBackend.from_settings()
    try:
        job = train(replicas=2)
        loop()
        running(cluster, job)
        settle(other, cluster)
        backend_sync(now=clock.now(), backend=other)
        loop()
        assert job.events.filter(kind="started").count() == 1
        assert len(creates(cluster)) == 2
    finally:
        other.close()
        set_backend(None)


def test_a_node_not_ready_past_its_timeout_counts_as_lost(
    settings: Any,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
) -> None:
    job = _job_running(loop, train, cluster)
    (pod,) = job.pods.select_related("node")
    cluster.add_node(pod.node.name, labels={"tidepool.io/node-pool": "A100-80G"}, ready=False)
    loop(60)  # the node sync sees it NotReady; the pod still reports Running
    job.refresh_from_db()
    assert job.status == Status.RUNNING
    loop(settings.K8S_NOT_READY_SECONDS)
    job.refresh_from_db()
    assert job.status == Status.REQUEUED and "not ready for 300 s" in job.status_reason


def test_a_pod_that_never_starts_fails_after_the_pending_deadline(
    settings: Any,
    loop: Callable[..., None],
    train: Callable[..., Workload],
    cluster: FakeCluster,
    k8s: KubernetesBackend,
) -> None:
    job = train(replicas=1, fault_tolerance=False)
    loop()
    loop(settings.K8S_PENDING_SECONDS - 10)
    job.refresh_from_db()
    assert job.status == Status.RUNNING
    loop(10)
    job.refresh_from_db()
    assert job.status == Status.FAILED and "Not started within 900 s" in job.status_reason


def test_the_eviction_subresource_marks_and_deletes_the_pod(
    server: FakeApiServer, cluster: FakeCluster
) -> None:
    cluster.put_pod(_owned("x", 1, 0))
    core = client.CoreV1Api(client.ApiClient(_configuration(cluster)))
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="tp-1-0-0", namespace=NAMESPACE))
    core.create_namespaced_pod_eviction("tp-1-0-0", NAMESPACE, body)
    pod = cluster.pod(NAMESPACE, "tp-1-0-0")
    (condition,) = pod["status"]["conditions"]
    assert (condition["type"], condition["reason"]) == ("DisruptionTarget", "EvictionByEvictionAPI")
    assert pod["metadata"]["deletionTimestamp"]


def _configuration(cluster: FakeCluster) -> client.Configuration:
    configuration = client.Configuration()
    configuration.host = cluster.url
    return configuration
