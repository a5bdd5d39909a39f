"""What a replica looks like to Kubernetes: its namespace, labels, resources and Pod body."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from kubernetes import client

from cluster.choices import GpuSharing
from console.units import milli_to_gpus
from jobs.backends.kubernetes.config import NAMESPACE_RE, KubeConfig
from jobs.reports.env import report_env

if TYPE_CHECKING:
    from jobs.models import Pod

MANAGED_BY = "app.kubernetes.io/managed-by"
INSTANCE = "tidepool.io/instance"
WORKLOAD = "tidepool.io/workload-id"
REPLICA = "tidepool.io/replica"
ATTEMPT = "tidepool.io/attempt"
POD_ID = "tidepool.io/pod-id"
KIND = "tidepool.io/kind"
OWNER = "tidepool"

log = logging.getLogger(__name__)
# What TIDEPOOL_INSTANCE_URL_TEMPLATE may name.
URL_PLACEHOLDERS = ("namespace", "pod", "workspace", "workload", "node")

# The GPU taint cloud providers put on GPU nodes (nodes.TOLERATED).
TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)

# A replica as its pod's name and labels give it: (workload id, replica index, attempt).
Key = tuple[int, int, int]


class Refused(Exception):
    """A replica this cluster cannot be asked to run; the message says why."""


def selector(kube: KubeConfig) -> str:
    """The label selector of every pod this Tidepool instance owns."""
    return f"{MANAGED_BY}={OWNER},{INSTANCE}={kube.instance}"


def owned(obj: dict[str, Any], kube: KubeConfig) -> bool:
    """Whether a pod (as the API returns it) belongs to this Tidepool instance."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY) == OWNER and labels.get(INSTANCE) == kube.instance


def key_of(obj: dict[str, Any]) -> Key | None:
    """The replica an owned pod runs, from its labels (None if they were tampered with)."""
    labels = obj["metadata"].get("labels") or {}
    try:
        return int(labels[WORKLOAD]), int(labels[REPLICA]), int(labels[ATTEMPT])
    except (KeyError, ValueError):
        return None


def key(pod: Pod) -> Key:
    """The replica a pod row stands for."""
    return pod.workload_id, pod.index, pod.attempt


def namespace_for(workspace: str, kube: KubeConfig) -> str:
    """The workspace's namespace: the template with the workspace name made DNS-safe."""
    safe = workspace.lower().replace("_", "-").replace(".", "-")
    namespace = kube.namespace.format(workspace=safe)
    if not NAMESPACE_RE.match(namespace):
        raise Refused(
            f"Namespace {namespace!r} for workspace {workspace} is not a valid Kubernetes name "
            "(TIDEPOOL_K8S_NAMESPACE)."
        )
    return namespace


def instance_url(pod: Pod, kube: KubeConfig, template: str) -> str | None:
    """The link to an interactive instance's pod: the URL template filled in, or None.

    The template (TIDEPOOL_INSTANCE_URL_TEMPLATE) may use {namespace}, {pod}, {workspace},
    {workload} and {node}, each URL-quoted. Without a template, or with one that names
    something else, there is no link (logged): the page still shows the instance.
    """
    if not template:
        return None
    workload = pod.workload
    try:
        namespace = namespace_for(workload.workspace.name, kube)
    except Refused:
        return None
    values = {
        "namespace": namespace,
        "pod": pod.name,
        "workspace": workload.workspace.name,
        "workload": workload.name,
        "node": pod.node.name if pod.node else "",
    }
    try:
        return template.format(**{k: quote(v, safe="") for k, v in values.items()})
    except (KeyError, IndexError, ValueError, AttributeError) as e:
        log.error(
            "TIDEPOOL_INSTANCE_URL_TEMPLATE %r may only use %s (%r); no Open link.",
            template,
            ", ".join(f"{{{k}}}" for k in URL_PLACEHOLDERS),
            e,
        )
        return None


def gpu_resources(
    milli_gpu: int, kube: KubeConfig, sharing: str = GpuSharing.ANY
) -> dict[str, str]:
    """The extended resource (and count) that asks for this many milli-GPUs on a node whose
    GPUs are handed out as `sharing` says (cluster.choices.GpuSharing).

    Whole GPUs (or MIG slices) use the GPU resource. A fraction of one GPU on a time-slicing
    or MPS node is one replica of the GPU resource: a share of a GPU's time, as large as the
    device plugin's replicas make it, not isolated memory (gpus.py). Elsewhere a fraction uses
    the shared-GPU resource of a device plugin that offers each GPU as `gpu_slices` slices
    (NVIDIA time-slicing with renamed resources). Anything else is refused.
    """
    if milli_gpu == 0:
        return {}
    if milli_gpu % 1000 == 0:
        return {kube.gpu_resource: str(milli_gpu // 1000)}
    gpus = milli_to_gpus(milli_gpu)
    if milli_gpu > 1000:
        raise Refused(
            f"{gpus} GPUs per replica: Kubernetes gives a replica whole GPUs or a slice of one "
            "GPU, not both."
        )
    if sharing in (GpuSharing.TIME_SLICING, GpuSharing.MPS):
        return {kube.gpu_resource: "1"}
    if not kube.shared_gpu_resource:
        raise Refused(
            f"{gpus} GPU per replica is a fraction of a GPU, and this cluster has no shared-GPU "
            "resource (TIDEPOOL_K8S_SHARED_GPU_RESOURCE)."
        )
    slices, rest = divmod(milli_gpu * kube.gpu_slices, 1000)
    if rest:
        raise Refused(
            f"{gpus} GPU per replica is not a whole number of {kube.shared_gpu_resource} "
            f"slices (1/{kube.gpu_slices} GPU each)."
        )
    return {kube.shared_gpu_resource: str(slices)}


def pod_body(pod: Pod, kube: KubeConfig) -> tuple[str, client.V1Pod]:
    """The namespace and the Pod of one replica, for the node the scheduler chose."""
    w = pod.workload
    if not w.image:
        raise Refused(f"{w.name} has no container image; Kubernetes needs one.")
    if pod.node is None:
        raise Refused(f"Replica {pod.index} of {w.name} has no node.")
    namespace = namespace_for(w.workspace.name, kube)
    resources = gpu_resources(w.gpu, kube, pod.node.gpu_sharing)
    if w.cpu:
        resources["cpu"] = f"{w.cpu}m"
    if w.memory:
        resources["memory"] = f"{w.memory}Mi"
    labels = {
        MANAGED_BY: OWNER,
        INSTANCE: kube.instance,
        WORKLOAD: str(w.pk),
        REPLICA: str(pod.index),
        ATTEMPT: str(pod.attempt),
        KIND: w.kind,
        POD_ID: str(pod.pk),
    }
    env = {
        "TIDEPOOL_WORKLOAD": w.name,
        "TIDEPOOL_REPLICA": str(pod.index),
        "TIDEPOOL_REPLICAS": str(w.replicas),
        "TIDEPOOL_ATTEMPT": str(pod.attempt),
        # Where and with what token the replica reports, and its checkpoint to resume from.
        **report_env(pod),
    }
    container = client.V1Container(
        name="main",
        image=w.image,
        command=["/bin/sh", "-c", w.command] if w.command.strip() else None,
        env=[client.V1EnvVar(name=k, value=v) for k, v in env.items()],
        # Limits equal to requests: Guaranteed QoS, the last class the kubelet evicts.
        resources=client.V1ResourceRequirements(requests=resources, limits=dict(resources)),
    )
    body = client.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=client.V1ObjectMeta(
            name=pod.name,
            namespace=namespace,
            labels=labels,
            annotations={
                "tidepool.io/workspace": w.workspace.name,
                "tidepool.io/workload": w.name,
                "tidepool.io/borrowed": "true" if pod.borrowed else "false",
                "tidepool.io/devices": ",".join(str(d) for d in pod.devices),
            },
        ),
        spec=client.V1PodSpec(
            # Left to Tidepool's scheduler: kube-scheduler ignores it, and it is bound to its
            # node through pods/binding once created (binding.py).
            scheduler_name=kube.scheduler_name,
            tolerations=[
                client.V1Toleration(key=t["key"], operator=t["operator"], effect=t["effect"])
                for t in TOLERATIONS
            ],
            # Fault tolerance (restart, requeue from a checkpoint) is Tidepool's, not the kubelet's.
            restart_policy="Never",
            containers=[container],
        ),
    )
    return namespace, body
