"""What pods Tidepool does not own hold on each node: DaemonSets, system pods, other tenants.

Listed at node-sync time (every pod bound to a node, `spec.nodeName!=`, a page of 500 at a
time), so node capacity is what Tidepool can really use; the kubelet would refuse a pod that
counts on the rest (`OutOfnvidia.com/gpu`).
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from kubernetes.utils.quantity import parse_quantity

from jobs.backends.kubernetes.config import KubeConfig
from jobs.backends.kubernetes.errors import ApiError
from jobs.backends.kubernetes.manifest import INSTANCE

if TYPE_CHECKING:
    from jobs.backends.kubernetes.api import Api

PAGE = 500
BOUND = "spec.nodeName!="
# The resources a pod's requests are summed over: GPUs by resource name, CPU, memory.
Held = dict[str, Decimal]


def _add(total: Held, requests: dict[str, str] | None, *, keep_max: bool = False) -> None:
    for name, quantity in (requests or {}).items():
        value: Decimal = parse_quantity(quantity)  # type: ignore[no-untyped-call]
        total[name] = (
            max(total.get(name, Decimal(0)), value)
            if keep_max
            else (total.get(name, Decimal(0)) + value)
        )


def pod_requests(spec: dict[str, Any]) -> Held:
    """What the kubelet counts for one pod: its containers' requests, or its largest init
    container's if larger (init containers run one at a time), plus the pod's overhead."""
    running: Held = {}
    for c in spec.get("containers") or []:
        _add(running, (c.get("resources") or {}).get("requests"))
    init: Held = {}
    for c in spec.get("initContainers") or []:
        _add(init, (c.get("resources") or {}).get("requests"), keep_max=True)
    total = {k: max(running.get(k, Decimal(0)), init.get(k, Decimal(0))) for k in {*running, *init}}
    _add(total, spec.get("overhead"))
    return total


def foreign_held(api: Api, kube: KubeConfig) -> dict[str, Held]:
    """Per node name, the summed requests of the live pods bound there that are not ours.

    A `continue` token that expired (410) starts the listing over, once.
    """
    held: dict[str, Held] = defaultdict(dict)
    token: str | None = None
    restarts = 1
    while True:
        try:
            page: dict[str, Any] = api.json(
                "list_pod_for_all_namespaces",
                # Our own pods are left out by the server: the list grows with the foreign ones.
                label_selector=f"{INSTANCE}!={kube.instance}",
                field_selector=BOUND,
                limit=PAGE,
                _continue=token,
            )
        except ApiError as e:
            if e.status != 410 or token is None or not restarts:
                raise
            held, token, restarts = defaultdict(dict), None, restarts - 1
            continue
        for obj in page.get("items") or []:
            phase = (obj.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                continue
            node = (obj.get("spec") or {}).get("nodeName")
            if node:
                for name, value in pod_requests(obj["spec"]).items():
                    held[node][name] = held[node].get(name, Decimal(0)) + value
        token = (page.get("metadata") or {}).get("continue") or None
        if token is None:
            return held
