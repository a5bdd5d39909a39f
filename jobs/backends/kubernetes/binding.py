"""Binding pods to nodes the way custom schedulers do (KAI Scheduler, kube-scheduler).

Tidepool's pods name TIDEPOOL_K8S_SCHEDULER_NAME and no node, so kube-scheduler leaves them
alone and the kubelet does not see them yet. Once a pod exists, Tidepool binds it through the
`pods/binding` subresource to the node its core chose, naming the pod's UID: if the name now
belongs to another pod, the API server refuses (409) instead of binding it. Just before each
create the node is read again (one GET per node and sync): a node that was cordoned, tainted,
pressured or lost since the last node sync gets no pod, and the replica is placed elsewhere.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobs.backends.base import NODE_REFUSAL
from jobs.backends.kubernetes.nodes import ineligibility

log = logging.getLogger(__name__)
NETWORK_ERRORS = (urllib3.exceptions.HTTPError, OSError)


class Binder:
    """Re-checks nodes before creates and binds created pods to them."""

    def __init__(self, api: client.CoreV1Api, timeout: float) -> None:
        self.api = api
        self.timeout = timeout
        self._checked: dict[str, str] = {}  # node name -> why it refuses ("" fine), this sync

    def forget(self) -> None:
        """A new sync: nodes are read again before the next creates."""
        self._checked.clear()

    def refusal(self, node: str) -> str:
        """Why `node` must not get a new pod now (a NODE_REFUSAL sentence), or "" if it may.

        A node that cannot be read (a network error, a 5xx) is not held against it: the pod is
        created, and the kubelet still has the last word.
        """
        if node not in self._checked:
            try:
                response: Any = self.api.read_node(
                    node, _preload_content=False, _request_timeout=self.timeout
                )
                self._checked[node] = ineligibility(json.loads(response.data))
            except ApiException as e:
                self._checked[node] = "is gone" if e.status == 404 else ""
            except NETWORK_ERRORS:
                self._checked[node] = ""
        why = self._checked[node]
        return f"{NODE_REFUSAL} {node}: it {why} now, so no pod was created there" if why else ""

    def bind(self, obj: dict[str, Any], node: str) -> bool:
        """Bind the created pod `obj` to `node` (its UID as precondition); True once bound."""
        meta = obj["metadata"]
        body = client.V1Binding(
            api_version="v1",
            kind="Binding",
            metadata=client.V1ObjectMeta(name=meta["name"], uid=meta["uid"]),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            # Raw: the client cannot read the Status the server answers as a V1Binding.
            self.api.create_namespaced_pod_binding(
                meta["name"],
                meta["namespace"],
                body,
                _preload_content=False,
                _request_timeout=self.timeout,
            )
        except (ApiException, *NETWORK_ERRORS) as e:
            log.warning("Binding pod %s to %s failed (%s); retrying later.", meta["name"], node, e)
            return False
        obj["spec"]["nodeName"] = node  # as the server now has it (the watch brings the rest)
        return True
