"""The Kubernetes backend's settings, checked once, and the API client they describe."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from kubernetes import client, config

# A namespace is a DNS-1123 label.
NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# A scheduler name is a DNS-1123 subdomain.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
NAME_RE = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")


@dataclass(frozen=True)
class KubeConfig:
    """Where pods go, how they are labelled, and how GPUs are asked for."""

    kubeconfig: str = ""
    context: str = ""
    namespace: str = "tidepool-{workspace}"
    instance: str = "tidepool"
    node_pool_label: str = "tidepool.io/node-pool"
    gpu_resource: str = "nvidia.com/gpu"
    shared_gpu_resource: str = ""
    gpu_slices: int = 0
    watch_seconds: int = 240
    node_sync_seconds: float = 60.0
    scheduler_name: str = "tidepool"
    page_size: int = 500
    qps: float = 5.0
    burst: int = 10
    request_seconds: float = 30.0
    backoff_seconds: float = 0.5
    max_deletes: int = 50
    retention_seconds: float = 3600.0
    terminating_seconds: float = 600.0
    image_pull_grace_seconds: float = 300.0
    pending_seconds: float = 900.0
    not_ready_seconds: float = 300.0

    def __post_init__(self) -> None:
        try:
            self.namespace.format(workspace="w")
        except (KeyError, IndexError, ValueError) as e:
            raise ImproperlyConfigured(
                f"TIDEPOOL_K8S_NAMESPACE {self.namespace!r} may only use the placeholder "
                f"{{workspace}} ({e!r})."
            ) from e
        if self.shared_gpu_resource and self.gpu_slices < 2:
            raise ImproperlyConfigured(
                f"TIDEPOOL_K8S_SHARED_GPU_RESOURCE is {self.shared_gpu_resource!r}, so "
                f"TIDEPOOL_K8S_GPU_SLICES must say how many slices one GPU offers (2 or more), "
                f"not {self.gpu_slices}."
            )
        if not NAME_RE.match(self.scheduler_name):
            raise ImproperlyConfigured(
                f"TIDEPOOL_K8S_SCHEDULER_NAME {self.scheduler_name!r} is not a valid scheduler "
                "name (a DNS subdomain, e.g. tidepool)."
            )
        if not 60 <= self.watch_seconds <= 300:
            raise ImproperlyConfigured(
                f"TIDEPOOL_K8S_WATCH_SECONDS must be 60 to 300 (a long watch with bookmarks "
                f"stays inside the API server's watch window), not {self.watch_seconds}."
            )
        if self.qps <= 0 or self.burst < 1:
            raise ImproperlyConfigured(
                f"TIDEPOOL_K8S_QPS must be above 0 and TIDEPOOL_K8S_BURST 1 or more, not "
                f"{self.qps} and {self.burst}."
            )

    @classmethod
    def from_settings(cls) -> KubeConfig:
        """The K8S_* Django settings."""
        return cls(
            kubeconfig=settings.K8S_KUBECONFIG,
            context=settings.K8S_CONTEXT,
            namespace=settings.K8S_NAMESPACE,
            instance=settings.K8S_INSTANCE,
            node_pool_label=settings.K8S_NODE_POOL_LABEL,
            gpu_resource=settings.K8S_GPU_RESOURCE,
            shared_gpu_resource=settings.K8S_SHARED_GPU_RESOURCE,
            gpu_slices=settings.K8S_GPU_SLICES,
            watch_seconds=settings.K8S_WATCH_SECONDS,
            node_sync_seconds=settings.K8S_NODE_SYNC_SECONDS,
            scheduler_name=settings.K8S_SCHEDULER_NAME,
            page_size=settings.K8S_PAGE_SIZE,
            qps=settings.K8S_QPS,
            burst=settings.K8S_BURST,
            request_seconds=settings.K8S_REQUEST_SECONDS,
            backoff_seconds=settings.K8S_BACKOFF_SECONDS,
            max_deletes=settings.K8S_MAX_DELETES,
            retention_seconds=settings.K8S_RETENTION_SECONDS,
            terminating_seconds=settings.K8S_TERMINATING_SECONDS,
            image_pull_grace_seconds=settings.K8S_IMAGE_PULL_GRACE_SECONDS,
            pending_seconds=settings.K8S_PENDING_SECONDS,
            not_ready_seconds=settings.K8S_NOT_READY_SECONDS,
        )


def api_client(kube: KubeConfig) -> client.ApiClient:
    """An API client from the kubeconfig file, or from the pod's service account if none."""
    if kube.kubeconfig:
        # Like kubectl, KUBECONFIG may list several files; the client merges those that exist.
        paths = [os.path.expanduser(p) for p in kube.kubeconfig.split(os.pathsep) if p]
        if not any(os.path.isfile(p) for p in paths):
            raise ImproperlyConfigured(f"KUBECONFIG {kube.kubeconfig!r} names no existing file.")
        loaded: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=kube.kubeconfig, context=kube.context or None, persist_config=False
        )
        return loaded
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        raise ImproperlyConfigured(
            "TIDEPOOL_BACKEND=kubernetes needs KUBECONFIG (a kubeconfig file) or to run inside "
            "the cluster with a service account; set TIDEPOOL_BACKEND=simulated to run without one."
        )
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)
