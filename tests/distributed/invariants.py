"""The control loop's invariants, read from the database: each one broken, as a sentence.

DESIGN.md section 2, "Exactly once, for every writer": at every commit no GPU device, node
GPU, CPU or memory is over capacity, no live pod belongs to an ended workload, a cancel that
answered 2xx stays final, and a pod's status only moves forward. Issue 17 adds one admission
per attempt. `violations` checks what the current state can show; `tests.distributed.audit`
catches the states in between, at each commit.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from django.db import connection, transaction
from django.db.models import Count

from cluster.models import Node
from jobs.choices import ENDED_STATUSES, LIVE_POD_STATUSES, EventKind, Kind, RestartMode, Status
from jobs.models import Pod, Workload, WorkloadEvent

MILLI = 1000  # milli-GPU per GPU device
EXAMPLES = 8  # sentences shown per rule in a summary


class Violation(NamedTuple):
    """One broken invariant: which rule, and what a user would see."""

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


@dataclass(frozen=True)
class Cancel:
    """A cancel that answered 2xx, and the highest pod id committed when it answered."""

    workload_id: int
    last_pod_id: int


def last_pod_id() -> int:
    """The highest pod id committed now: a pod above it was committed later."""
    return Pod.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def violations(*, cancels: Iterable[Cancel] = ()) -> list[Violation]:
    """Every invariant the database's current state breaks, all read in one snapshot."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return [*_capacity(), *_live_pods_of_ended(), *_attempts(), *_cancels(list(cancels))]


def summary(found: list[Violation], *, heading: str = "invariant violations") -> str:
    """The violations grouped by rule, with a count and a few examples of each."""
    by_rule: dict[str, list[str]] = defaultdict(list)
    for v in found:
        by_rule[v.rule].append(v.detail)
    lines = [f"{len(found)} {heading}:"]
    for rule, details in sorted(by_rule.items(), key=lambda item: -len(item[1])):
        lines.append(f"  {rule} ({len(details)}):")
        lines += [f"    - {d}" for d in details[:EXAMPLES]]
        if len(details) > EXAMPLES:
            lines.append(f"    ... and {len(details) - EXAMPLES} more")
    return "\n".join(lines)


def _capacity() -> list[Violation]:
    """Live pods (Pending or Running) fit on their node: GPUs, each device, CPU, memory."""
    nodes = {n.pk: n for n in Node.objects.all()}
    used: dict[int, Counter[str]] = defaultdict(Counter)
    devices: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    live = Pod.objects.filter(status__in=LIVE_POD_STATUSES, node__isnull=False).values_list(
        "pk", "node_id", "devices", "workload__gpu", "workload__cpu", "workload__memory"
    )
    for pk, node_id, held, gpu, cpu, memory in live:
        used[node_id].update(gpu=gpu, cpu=cpu, memory=memory, pods=1)
        for device in held:
            devices[node_id, device].append((pk, min(gpu, MILLI)))
    found = []
    for node_id, u in sorted(used.items()):
        node = nodes[node_id]
        pods = u["pods"]
        for resource, have, unit in (
            ("gpu", node.gpus * MILLI, "milli-GPU"),
            ("cpu", node.cpu, "millicores"),
            ("memory", node.memory, "MiB"),
        ):
            if u[resource] > have:
                found.append(
                    Violation(
                        f"node {resource} over capacity",
                        f"{node.name}: {u[resource]} of {have} {unit} held by {pods} live pods",
                    )
                )
    for (node_id, device), shares in sorted(devices.items()):
        node = nodes[node_id]
        total = sum(share for _, share in shares)
        pods_text = ", ".join(str(pk) for pk, _ in shares)
        if device >= node.gpus:
            found.append(
                Violation(
                    "GPU device does not exist",
                    f"{node.name} has {node.gpus} GPUs, pods {pods_text} hold device {device}",
                )
            )
        elif total > MILLI:
            found.append(
                Violation(
                    "GPU device over capacity",
                    f"{node.name} device {device}: {total} of {MILLI} milli-GPU (pods {pods_text})",
                )
            )
    return found


def _live_pods_of_ended() -> list[Violation]:
    """No live pod of an ended workload; no live pod that has already ended once."""
    found = []
    ghosts = Pod.objects.filter(
        status__in=LIVE_POD_STATUSES, workload__status__in=ENDED_STATUSES
    ).values_list("pk", "status", "workload__name", "workload__status")
    for pk, status, name, workload_status in ghosts:
        found.append(
            Violation(
                "live pod of an ended workload",
                f"pod {pk} of {name} is {status} but {name} is {workload_status}",
            )
        )
    revived = Pod.objects.filter(status__in=LIVE_POD_STATUSES, ended_at__isnull=False).values_list(
        "pk", "status", "workload__name", "reason"
    )
    for pk, status, name, reason in revived:
        found.append(
            Violation(
                "pod status moved backwards",
                f"pod {pk} of {name} ended ({reason or 'no reason'}) but is {status} again",
            )
        )
    return found


def _attempts() -> list[Violation]:
    """A training job is admitted once per attempt, and each attempt is placed once.

    An attempt is one run of the job: its first, then one more per restart (a preemption
    or a failure requeues the job and adds 1 to `restarts`; its pods carry the attempt
    number in `Pod.attempt`). So the timeline's admissions, not counting relabels (In
    Quota / Not in Quota changes, recorded as admitted events with ``label``), number at
    most restarts + 1, and an attempt of a job that restarts whole (sync) has at most
    `replicas` pods.
    """
    admissions: Counter[int] = Counter()
    events = WorkloadEvent.objects.filter(kind=EventKind.ADMITTED, workload__kind=Kind.TRAINING)
    for workload_id, data in events.values_list("workload_id", "data"):
        if not (data or {}).get("label"):
            admissions[workload_id] += 1
    jobs = Workload.objects.in_bulk(list(admissions))
    found = []
    for workload_id, count in sorted(admissions.items()):
        job = jobs[workload_id]
        if count > job.restarts + 1:
            found.append(
                Violation(
                    "admitted more often than attempts",
                    f"{job.name} was admitted {count} times in {job.restarts + 1} attempt(s) "
                    f"(restarts {job.restarts}, now {job.status})",
                )
            )
    placed = (
        Pod.objects.filter(workload__kind=Kind.TRAINING, workload__restart_mode=RestartMode.SYNC)
        .values("workload_id", "workload__name", "workload__replicas", "attempt")
        .annotate(pods=Count("pk"))
    )
    for row in placed:
        if row["pods"] > row["workload__replicas"]:
            found.append(
                Violation(
                    "attempt placed more than once",
                    f"{row['workload__name']} attempt {row['attempt']} has {row['pods']} pods "
                    f"for {row['workload__replicas']} replicas",
                )
            )
    return found


def _cancels(cancels: list[Cancel]) -> list[Violation]:
    """A cancel that answered 2xx stays final: still Cancelled, no pod committed after it."""
    if not cancels:
        return []
    by_id = {c.workload_id: c for c in cancels}
    workloads = Workload.objects.in_bulk(list(by_id))
    found = []
    for workload_id, cancel in sorted(by_id.items()):
        w = workloads.get(workload_id)
        if w is None:
            found.append(Violation("cancelled workload lost", f"workload {workload_id} is gone"))
            continue
        if w.status != Status.CANCELLED:
            found.append(
                Violation(
                    "cancel undone",
                    f"{w.name}'s cancel answered 2xx but it is {w.status} now "
                    f"({w.status_reason or 'no reason'})",
                )
            )
        late = list(
            Pod.objects.filter(workload_id=workload_id, pk__gt=cancel.last_pod_id).values_list(
                "pk", "status"
            )
        )
        if late:
            pods_text = ", ".join(f"{pk} ({status})" for pk, status in late)
            found.append(
                Violation(
                    "pod created after a cancel",
                    f"{w.name} got pods {pods_text} after its cancel answered 2xx",
                )
            )
    return found
