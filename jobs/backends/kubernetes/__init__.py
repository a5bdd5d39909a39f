"""The Kubernetes cluster backend (TIDEPOOL_BACKEND=kubernetes), built on the official client."""

from __future__ import annotations

from jobs.backends.kubernetes.backend import KubernetesBackend
from jobs.backends.kubernetes.config import KubeConfig

__all__ = ["KubeConfig", "KubernetesBackend"]
