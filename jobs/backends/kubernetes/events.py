"""Kubernetes Events for Tidepool's decisions about a pod, as `kubectl describe pod` shows them.

core/v1 Events with `reportingComponent: tidepool`, like kube-scheduler's: Scheduled (bound to
a node), Preempted (deleted to make room), NodeRefused (a node refused the pod and cools down).
An event that cannot be written is logged and dropped: it never holds up the control loop.
"""

from __future__ import annotations

import logging
import socket
import uuid
from typing import TYPE_CHECKING, Any

from console import clock
from jobs.backends.kubernetes.errors import ApiError

if TYPE_CHECKING:
    from jobs.backends.kubernetes.api import Api
    from jobs.backends.kubernetes.watch import PodState

log = logging.getLogger(__name__)

COMPONENT = "tidepool"
MESSAGE_CHARS = 1024  # the API server refuses longer event messages


class Recorder:
    """Writes events about owned pods into their namespaces."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.instance = f"{COMPONENT}-{socket.gethostname()}"[:128]

    def emit(self, pod: PodState, reason: str, message: str, *, warning: bool = False) -> None:
        """Record `reason` with `message` about an owned pod."""
        stamp = clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        body: Any = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{pod.name}.{uuid.uuid4().hex[:16]}",
                "namespace": pod.namespace,
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
            },
            "reason": reason,
            "message": message[:MESSAGE_CHARS],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.api.call("create_namespaced_event", pod.namespace, body)
        except ApiError as e:
            log.warning("Event %s for pod %s not recorded (%s).", reason, pod.name, e)
