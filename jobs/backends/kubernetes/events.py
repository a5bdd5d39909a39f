"""Kubernetes Events for Tidepool's decisions about a pod, as `kubectl describe pod` shows them.

core/v1 Events with `reportingComponent: tidepool`, like kube-scheduler's: Scheduled (bound to
a node), Preempted (deleted to make room), NodeRefused (a node refused the pod and cools down).
An event that cannot be written is logged and dropped: it never holds up the control loop.
"""

from __future__ import annotations

import logging
import socket
import uuid
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from console import clock

log = logging.getLogger(__name__)

COMPONENT = "tidepool"
MESSAGE_CHARS = 1024  # the API server refuses longer event messages


class Recorder:
    """Writes events about owned pods into their namespaces."""

    def __init__(self, api: client.CoreV1Api, timeout: float) -> None:
        self.api = api
        self.timeout = timeout
        self.instance = f"{COMPONENT}-{socket.gethostname()}"[:128]

    def emit(
        self, obj: dict[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        """Record `reason` with `message` about the pod `obj` (as the API returned it)."""
        meta = obj["metadata"]
        stamp = clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        body: Any = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
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
            self.api.create_namespaced_event(
                meta["namespace"], body, _preload_content=False, _request_timeout=self.timeout
            )
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            log.warning("Event %s for pod %s not recorded (%s).", reason, meta["name"], e)
