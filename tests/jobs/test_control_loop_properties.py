"""Property: random submits, cancels, scales, ticks and faults never break the control loop.

After every step: no workload is lost (each is queued, running or ended, with pods to
match), no node or GPU device is over-allocated, and no pod runs for a workload that ended.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from django.core.management import call_command
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.models import Node
from console.errors import DomainError
from jobs.choices import ENDED_STATUSES, LIVE_POD_STATUSES, WAITING_STATUSES, Kind, Status
from jobs.models import Pod, Workload
from jobs.services.scaling import service_scale
from jobs.services.workloads import workload_cancel

pytestmark = pytest.mark.django_db

submits = st.tuples(
    st.just("submit"),
    st.sampled_from(["bob", "carol"]),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([0.5, 1, 4, 8]),
    st.sampled_from(["none", "acceptable", "idle_only"]),
    st.integers(1, 9),
)
steps = st.one_of(
    submits,
    st.tuples(st.just("cancel"), st.integers(0, 50)),
    st.tuples(st.just("scale"), st.integers(1, 8)),
    st.tuples(st.just("tick"), st.sampled_from([0, 30, 300, 3600])),
    st.tuples(st.just("crash"), st.integers(0, 50)),
    st.tuples(st.just("node_down"), st.integers(1, 16)),
    st.tuples(st.just("hang"), st.integers(0, 50)),
)


def _check_invariants() -> None:
    per_node: dict[int, int] = defaultdict(int)
    per_device: dict[tuple[int, int], int] = defaultdict(int)
    live = Pod.objects.filter(status__in=LIVE_POD_STATUSES).select_related("workload")
    for pod in live:
        w = pod.workload
        assert w.status not in ENDED_STATUSES, f"pod of ended {w.name} still {pod.status}"
        assert w.status not in WAITING_STATUSES, f"pod of waiting {w.name} still {pod.status}"
        per_node[pod.node_id] += w.gpu
        for device in pod.devices:
            per_device[(pod.node_id, device)] += min(w.gpu, 1000)
    capacity = dict(Node.objects.values_list("pk", "gpus"))
    for node_id, used in per_node.items():
        assert used <= capacity[node_id] * 1000, f"node {node_id} over-allocated: {used}"
    for key, used in per_device.items():
        assert used <= 1000, f"GPU device {key} over-allocated: {used}"
    for w in Workload.objects.filter(status=Status.RUNNING).prefetch_related("pods"):
        pods = [p for p in w.pods.all() if p.status in LIVE_POD_STATUSES]
        if w.kind == Kind.INFERENCE:
            assert pods or w.replicas == 0
        else:
            assert len(pods) == w.replicas, f"running {w.name} has {len(pods)} live pods"
    known = {Status.QUEUED, Status.RUNNING, Status.REQUEUED, *ENDED_STATUSES}
    assert set(Workload.objects.values_list("status", flat=True)) <= known


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(steps, min_size=5, max_size=25))
def test_random_operations_never_lose_workloads_or_overallocate(
    demo, bob, carol, service, submit, tick, sim, clock, program
) -> None:
    users = {"bob": bob, "carol": carol}
    with transaction.atomic():
        for n, step in enumerate(program):
            action = step[0]
            active = list(Workload.objects.exclude(status__in=ENDED_STATUSES).order_by("pk"))
            try:
                if action == "submit":
                    _, who, replicas, gpus, idle, priority = step
                    submit(
                        users[who],
                        f"job-{n}",
                        replicas=replicas,
                        gpus=gpus,
                        idle_policy=idle,
                        priority=priority,
                        total_work=3600 * gpus,
                    )
                elif action == "cancel" and active:
                    workload_cancel(actor=bob, workload=active[step[1] % len(active)])
                elif action == "scale":
                    service_scale(service=service, replicas=step[1], now=clock.now())
                elif action == "tick":
                    tick(step[1])
                elif action == "crash":
                    pods = list(Pod.objects.filter(status__in=LIVE_POD_STATUSES).order_by("pk"))
                    if pods:
                        sim.inject_pod_crash(pods[step[1] % len(pods)])
                elif action == "node_down":
                    sim.inject_node_down(f"a100-{step[1]:02d}")
                elif action == "hang" and active:
                    sim.inject_hang(active[step[1] % len(active)])
            except DomainError:
                pass  # e.g. cancelling what just ended, or a cap: refused cleanly
            _check_invariants()
        tick(60)
        _check_invariants()
        transaction.set_rollback(True)


def test_inject_fault_command_marks_a_node_down(demo, bob, submit, tick) -> None:
    job = submit(bob, "victim", replicas=1)
    tick()
    node = job.pods.get().node.name
    call_command("inject_fault", "node-down", node)
    assert not Node.objects.get(name=node).schedulable
    tick(10)
    job.refresh_from_db()
    assert job.restarts == 1
    assert job.pods.filter(status__in=LIVE_POD_STATUSES).exclude(node__name=node).count() == 1
