"""How the Kubernetes backend reads pods and nodes and expresses replicas: tables, no cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from kubernetes.config import incluster_config

from jobs.backends.kubernetes import KubeConfig
from jobs.backends.kubernetes.config import api_client
from jobs.backends.kubernetes.manifest import Refused, gpu_resources, namespace_for
from jobs.backends.kubernetes.nodes import cluster_node
from jobs.backends.kubernetes.status import Observed, observe_pod
from jobs.choices import PodStatus

SHARED = KubeConfig(shared_gpu_resource="nvidia.com/gpu.shared", gpu_slices=4)


def container(state: dict[str, Any]) -> dict[str, Any]:
    return {"name": "main", "image": "i", "imageID": "", "ready": False, "restartCount": 0, **state}


def ended(code: int, reason: str, **pod: Any) -> dict[str, Any]:
    state = {"state": {"terminated": {"exitCode": code, "reason": reason}}}
    return {"status": {"phase": "Failed", "containerStatuses": [container(state)], **pod}}


@pytest.mark.parametrize(
    ("pod", "observed"),
    [
        ({"status": {"phase": "Pending"}}, Observed(PodStatus.PENDING)),
        ({"status": {"phase": "Running"}}, Observed(PodStatus.RUNNING)),
        (
            {"status": {"phase": "Succeeded"}},
            Observed(PodStatus.SUCCEEDED, exit_code=0),
        ),
        (
            ended(137, "OOMKilled"),
            Observed(PodStatus.FAILED, 137, "OOMKilled: out of memory (exit code 137)"),
        ),
        (ended(3, "Error"), Observed(PodStatus.FAILED, 3, "Error (exit code 3)")),
        (
            {
                "status": {
                    "phase": "Failed",
                    "reason": "Evicted",
                    "message": "The node was low on resource: memory.",
                }
            },
            # evicted before any container ran: refused at admission
            Observed(
                PodStatus.FAILED,
                None,
                "Evicted: The node was low on resource: memory.",
                rejected=True,
            ),
        ),
        (
            {
                "status": {
                    "phase": "Failed",
                    "reason": "OutOfnvidia.com/gpu",
                    "message": "Node didn't have enough resource: nvidia.com/gpu",
                }
            },
            Observed(
                PodStatus.FAILED,
                None,
                "OutOfnvidia.com/gpu: Node didn't have enough resource: nvidia.com/gpu",
                rejected=True,
            ),
        ),
        (
            {"status": {"phase": "Running", "reason": "NodeLost", "message": "Node a1 is gone"}},
            Observed(PodStatus.FAILED, None, "Node lost. Node a1 is gone", node_lost=True),
        ),
        (
            {
                "status": {
                    "phase": "Failed",
                    "reason": "Terminated",
                    "message": "Pod was terminated in response to imminent node shutdown.",
                }
            },
            Observed(
                PodStatus.FAILED,
                None,
                "Node lost. Pod was terminated in response to imminent node shutdown.",
                node_lost=True,
            ),
        ),
        (
            {
                "status": {
                    "phase": "Running",
                    "conditions": [
                        {"type": "DisruptionTarget", "reason": "DeletionByTaintManager"}
                    ],
                }
            },
            Observed(PodStatus.FAILED, None, "Node lost.", node_lost=True),
        ),
        (
            {
                "status": {
                    "phase": "Pending",
                    "containerStatuses": [
                        container(
                            {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "no"}}}
                        )
                    ],
                }
            },
            Observed(PodStatus.FAILED, None, "ImagePullBackOff: no"),
        ),
        (
            {
                "status": {
                    "phase": "Pending",
                    "containerStatuses": [
                        container({"state": {"waiting": {"reason": "ContainerCreating"}}})
                    ],
                }
            },
            Observed(PodStatus.PENDING),
        ),
    ],
    ids=[
        "pending",
        "running",
        "succeeded",
        "oom-killed",
        "exit-code",
        "evicted",
        "kubelet-admission",
        "node-lost",
        "node-shutdown",
        "taint-eviction",
        "image-pull",
        "creating",
    ],
)
def test_pod_states_map_to_replica_states(pod: dict[str, Any], observed: Observed) -> None:
    assert observe_pod(pod) == observed


def test_a_long_message_is_clipped_to_fit_the_reason_columns() -> None:
    pod = {"status": {"phase": "Failed", "reason": "Evicted", "message": "x" * 1000}}
    assert len(observe_pod(pod).reason) == 160


@pytest.mark.parametrize(
    ("milli", "kube", "resources"),
    [
        (0, KubeConfig(), {}),
        (1000, KubeConfig(), {"nvidia.com/gpu": "1"}),
        (8000, KubeConfig(), {"nvidia.com/gpu": "8"}),
        (8000, SHARED, {"nvidia.com/gpu": "8"}),
        (500, SHARED, {"nvidia.com/gpu.shared": "2"}),
        (250, SHARED, {"nvidia.com/gpu.shared": "1"}),
    ],
    ids=["none", "one", "eight", "eight-shared-cluster", "half", "quarter"],
)
def test_gpus_are_asked_for_as_whole_devices_or_slices(
    milli: int, kube: KubeConfig, resources: dict[str, str]
) -> None:
    assert gpu_resources(milli, kube) == resources


@pytest.mark.parametrize(
    ("milli", "kube", "message"),
    [
        (500, KubeConfig(), "0.5 GPU per replica is a fraction of a GPU, and this cluster has no"),
        (300, SHARED, "0.3 GPU per replica is not a whole number of nvidia.com/gpu.shared"),
        (1500, SHARED, "1.5 GPUs per replica: Kubernetes gives a replica whole GPUs or a slice"),
    ],
    ids=["no-shared-resource", "not-a-slice-multiple", "whole-plus-fraction"],
)
def test_gpu_requests_kubernetes_cannot_express_are_refused(
    milli: int, kube: KubeConfig, message: str
) -> None:
    with pytest.raises(Refused, match=message):
        gpu_resources(milli, kube)


@pytest.mark.parametrize(
    ("template", "workspace", "namespace"),
    [
        ("tidepool-{workspace}", "workspace_a", "tidepool-workspace-a"),
        ("{workspace}", "Team.Vision", "team-vision"),
        ("gpu-jobs", "workspace_a", "gpu-jobs"),
    ],
)
def test_a_workspace_maps_to_a_dns_safe_namespace(
    template: str, workspace: str, namespace: str
) -> None:
    assert namespace_for(workspace, KubeConfig(namespace=template)) == namespace


def test_a_namespace_kubernetes_would_reject_is_refused_naming_the_setting() -> None:
    with pytest.raises(Refused, match="TIDEPOOL_K8S_NAMESPACE"):
        namespace_for("w" * 70, KubeConfig())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"shared_gpu_resource": "nvidia.com/gpu.shared"}, "TIDEPOOL_K8S_GPU_SLICES"),
        ({"namespace": "tp-{team}"}, "TIDEPOOL_K8S_NAMESPACE"),
        ({"watch_seconds": 0}, "TIDEPOOL_K8S_WATCH_SECONDS"),
    ],
    ids=["slices-missing", "unknown-placeholder", "no-watch-time"],
)
def test_bad_settings_are_refused_naming_the_setting(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        KubeConfig(**fields)


def test_a_node_is_read_from_its_allocatable_label_and_conditions() -> None:
    node = cluster_node(
        {
            "metadata": {"name": "t4-01", "labels": {"tidepool.io/node-pool": "T4"}},
            "spec": {},
            "status": {
                "allocatable": {
                    "nvidia.com/gpu": "2",
                    "nvidia.com/gpu.shared": "8",
                    "cpu": "7500m",
                    "memory": "30Gi",
                },
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        },
        SHARED,
    )
    assert (node.pool, node.gpus, node.cpu, node.memory) == ("T4", 4, 7500, 30720)
    assert not node.ready and not node.schedulable


def test_without_kubeconfig_inside_a_pod_the_service_account_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    configuration = api_client(KubeConfig(kubeconfig="")).configuration
    assert configuration.host == "https://10.96.0.1:443"
    assert configuration.api_key["BearerToken"] == "bearer sa-token"
    assert configuration.ssl_ca_cert == str(ca)
