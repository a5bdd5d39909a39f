"""A job on borrowed capacity, and a search for node names: issue 13's "a borrowed job's node is
never shown to team members"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cluster.models import Node
from jobs.backends.base import PodReport
from jobs.backends.simulated import SimulatedBackend
from jobs.models import Pod, Workload


def borrow(submit: Callable[..., Workload], tick: Callable[..., None], user: Any) -> Workload:
    """Bob's 7 × 8 GPUs with Acceptable idle resources: over Quota 1.1's 48, so all borrowed.

    Placed by one cycle and running after the next (pods start 30 s after creation).
    """
    job = submit(user, "borrower", replicas=7, idle_policy="acceptable")
    tick(1)
    tick(30)
    job.refresh_from_db()
    assert job.in_quota is False and job.status == "Running"
    pods = list(job.pods.all())
    assert len(pods) == 7 and all(p.borrowed and p.node_id for p in pods)
    return job


def node_names() -> list[str]:
    """Every node of the cluster."""
    return list(Node.objects.values_list("name", flat=True))


def named(text: str) -> list[str]:
    """The node names `text` holds."""
    return [name for name in node_names() if name in text]


def name_lost_nodes(sim: SimulatedBackend) -> None:
    """Have the simulated cluster report a lost node by its name, as the Kubernetes backend
    does ("Node lost: a100-03 is not ready")."""
    observe = sim.observe

    def naming(*, now: Any) -> list[PodReport]:
        reports = observe(now=now)
        lost = [r.pod_id for r in reports if r.node_lost]
        nodes = dict(Pod.objects.filter(pk__in=lost).values_list("pk", "node__name"))
        return [
            replace(r, reason=f"Node lost: {nodes[r.pod_id]} is not ready") if r.node_lost else r
            for r in reports
        ]

    sim.observe = naming  # type: ignore[method-assign]
