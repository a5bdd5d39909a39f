"""Binding pods to nodes the way custom schedulers do (KAI Scheduler, kube-scheduler).

Tidepool's pods name TIDEPOOL_K8S_SCHEDULER_NAME and no node, so kube-scheduler leaves them
alone and the kubelet does not see them yet. Once a pod exists, Tidepool binds it through the
`pods/binding` subresource to the node its core chose, naming the pod's UID: if the name now
belongs to another pod, the API server refuses (409) instead of binding it. Just before each
create the node is read again (one GET per node and sync): a node that was cordoned, tainted,
pressured or lost since the last node sync gets no pod, and the replica is placed elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Set
from typing import TYPE_CHECKING

from kubernetes import client

from jobs.backends.base import NODE_REFUSAL
from jobs.backends.kubernetes.errors import ApiError
from jobs.backends.kubernetes.nodes import ineligibility

if TYPE_CHECKING:
    from jobs.backends.kubernetes.api import Api
    from jobs.backends.kubernetes.watch import PodState

log = logging.getLogger(__name__)


class Binder:
    """Re-checks nodes before creates and binds created pods to them."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._checked: dict[str, str] = {}  # node name -> why it refuses ("" fine), this sync
        self._bound: set[str] = set()  # pods bound whose watch event has not come yet

    def forget(self, unbound: Set[str]) -> None:
        """A new sync: nodes are read again; `unbound` pods are those the cache has no node for."""
        self._checked.clear()
        self._bound &= unbound

    def refusal(self, node: str) -> str:
        """Why `node` must not get a new pod now (a NODE_REFUSAL sentence), or "" if it may.

        A node that cannot be read (a network error, a 5xx) is not held against it: the pod is
        created, and the kubelet still has the last word.
        """
        if node not in self._checked:
            try:
                self._checked[node] = ineligibility(self.api.json("read_node", node))
            except ApiError as e:
                self._checked[node] = "is gone" if e.status == 404 else ""
        why = self._checked[node]
        return f"{NODE_REFUSAL} {node}: it {why} now, so no pod was created there" if why else ""

    def bind(self, pod: PodState, node: str) -> bool:
        """Bind the created pod to `node` (its UID as precondition); True once bound."""
        if pod.name in self._bound:
            return False  # bound already; the watch has not brought it yet
        body = client.V1Binding(
            api_version="v1",
            kind="Binding",
            metadata=client.V1ObjectMeta(name=pod.name, uid=pod.uid),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            # Raw (Api.call): the client cannot read the Status the server answers as a Binding.
            self.api.call("create_namespaced_pod_binding", pod.name, pod.namespace, body)
        except ApiError as e:
            log.warning("Binding pod %s to %s failed (%s); retrying later.", pod.name, node, e)
            return False
        self._bound.add(pod.name)
        return True
