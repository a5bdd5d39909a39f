"""The kubelets of the stand-in cluster: admit the pods bound to their node, or refuse them.

It acts on the FakeCluster's state as a node's kubelet does at pod admission (the kubelet's
`lifecycle.PredicateAdmitHandler`): a pod bound to a Ready node either starts (Running) or is
refused before any container runs, with phase Failed and the kubelet's reason and message:
- `OutOf<resource>` when the requests of the pods already admitted there (ours or anyone's)
  leave too little of the node's allocatable, e.g. `OutOfnvidia.com/gpu` when pods Tidepool
  does not own hold the GPUs;
- `TaintToleration` for a `NoExecute` taint the pod does not tolerate (the kubelet ignores
  `NoSchedule` taints and cordons: those are the scheduler's business).
A pod that names a scheduler and no node stays Pending: no kubelet sees it until it is bound.

Nodes come from recorded API responses (tests/jobs/k8s_data/*.json, as `kubectl get node -o
json` prints them).
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from tests.jobs.k8s_fake import FakeCluster

DATA = Path(__file__).parent / "k8s_data"
POOL = "tidepool.io/node-pool"


def recorded_node(fixture: str, name: str, pool: str | None = None) -> dict[str, Any]:
    """A recorded node (k8s_data/<fixture>.json) renamed, in a Tidepool node pool if given."""
    obj: dict[str, Any] = json.loads((DATA / f"{fixture}.json").read_text())
    obj = copy.deepcopy(obj)
    obj["metadata"]["name"] = name
    obj["metadata"]["labels"]["kubernetes.io/hostname"] = name
    if pool is not None:
        obj["metadata"]["labels"][POOL] = pool
    return obj


def put_node(cluster: FakeCluster, obj: dict[str, Any]) -> None:
    """Add (or replace) a node with exactly this object."""
    with cluster.lock:
        cluster.version += 1
        obj["metadata"]["resourceVersion"] = str(cluster.version)
        cluster.nodes[obj["metadata"]["name"]] = obj


def _amount(quantity: str) -> Decimal:
    value: Decimal = parse_quantity(quantity)  # type: ignore[no-untyped-call]
    return value


def _requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for c in pod["spec"].get("containers") or []:
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, Decimal(0)) + _amount(q)
    return total


def _shown(resource: str, value: Decimal) -> int:
    """As the kubelet prints amounts: CPU in millicores, the rest in their units."""
    return int(value * 1000) if resource == "cpu" else int(value)


class Kubelet:
    """Every node's kubelet; `sync()` admits or refuses each newly bound pod, oldest first."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.admitted: set[str] = set()  # pod uids this kubelet already decided on

    def sync(self) -> list[str]:
        """Decide on every bound, undecided pod; returns the names of those refused."""
        refused = []
        with self.cluster.lock:
            for pod in sorted(self.cluster.pods.values(), key=_created):
                if self._decide(pod):
                    refused.append(pod["metadata"]["name"])
        return refused

    def _decide(self, pod: dict[str, Any]) -> bool:
        node = self.cluster.nodes.get(pod["spec"].get("nodeName") or "")
        uid = pod["metadata"]["uid"]
        if node is None or uid in self.admitted or pod["status"].get("phase") != "Pending":
            return False
        if not _ready(node):
            return False  # a kubelet that is down decides nothing
        self.admitted.add(uid)
        reason, message = self._refusal(pod, node)
        if reason:
            pod["status"] = {
                **pod["status"],
                "phase": "Failed",
                "reason": reason,
                "message": f"Pod was rejected: {message}",
                "startTime": "2026-12-01T06:00:01Z",
            }
        else:
            pod["status"] = {
                **pod["status"],
                "phase": "Running",
                "containerStatuses": _running(pod),
            }
        self.cluster._record("MODIFIED", pod)
        return bool(reason)

    def _refusal(self, pod: dict[str, Any], node: dict[str, Any]) -> tuple[str, str]:
        tolerated = {(t.get("key"), t.get("effect")) for t in pod["spec"].get("tolerations") or []}
        for taint in node["spec"].get("taints") or []:
            if taint["effect"] == "NoExecute" and (taint["key"], "NoExecute") not in tolerated:
                return "TaintToleration", "Predicate TaintToleration failed"
        used: dict[str, Decimal] = {}
        for other in self.cluster.pods.values():
            if other is pod or other["spec"].get("nodeName") != node["metadata"]["name"]:
                continue
            if other["status"].get("phase") != "Running":
                continue
            for name, value in _requests(other).items():
                used[name] = used.get(name, Decimal(0)) + value
        allocatable = node["status"]["allocatable"]
        wanted = _requests(pod)
        order = [r for r in ("cpu", "memory") if r in wanted] + sorted(
            r for r in wanted if r not in ("cpu", "memory")
        )
        for resource in order:
            capacity = _amount(allocatable.get(resource, "0"))
            held = used.get(resource, Decimal(0))
            if held + wanted[resource] > capacity:
                return f"OutOf{resource}", (
                    f"Node didn't have enough resource: {resource}, requested: "
                    f"{_shown(resource, wanted[resource])}, used: {_shown(resource, held)}, "
                    f"capacity: {_shown(resource, capacity)}"
                )
        return "", ""


def _created(pod: dict[str, Any]) -> int:
    return int(pod["metadata"].get("resourceVersion") or 0)


def _ready(node: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in node["status"].get("conditions") or []
    )


def _running(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": c["name"],
            "image": c["image"],
            "imageID": f"{c['image']}@sha256:0",
            "ready": True,
            "restartCount": 0,
            "started": True,
            "state": {"running": {"startedAt": "2026-12-01T06:00:02Z"}},
        }
        for c in pod["spec"].get("containers") or []
    ]
