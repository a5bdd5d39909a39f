"""Whether a workload could ever run as the cluster and its quota stand: a submit that never
could is refused with the numbers instead of waiting in the queue forever.

Three ceilings, checked in this order, each refused on the field the client can change:
1. one replica must fit on some node of an accepted pool (``gpu``, ``cpu`` or ``memory``);
2. a training job's replicas (a gang, placed in one pool) must fit the nodes of one pool at
   once (``replicas``);
3. a training job must fit within the ``max`` of every quota of its chain in one of those
   pools (``replicas``): the max counts In-Quota and borrowed GPUs alike.

A job above its quota's guaranteed ``min`` is not refused: a scale may raise the min.

Pools without nodes are skipped: their nodes may not have joined yet (Kubernetes), and the
scheduler says so while the job waits. Cordoned nodes count: they may come back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db.models import Count

from cluster.models import Node, NodePool
from console.errors import DomainError
from console.units import MILLI, called, milli_to_gpus
from jobs.choices import Kind
from quotas.models import Quota, QuotaResource

UNBOUNDED = 1 << 62


def gpus(milli: int) -> str:
    """An amount of GPUs with its noun: 1 GPU, 0.5 GPUs, 8 GPUs."""
    return f"{milli_to_gpus(milli)} GPU{'' if milli == MILLI else 's'}"


def _pools_text(names: Iterable[str]) -> str:
    """ "pool A" or "pools A, B"."""
    names = sorted(names)
    return f"pool{'s' if len(names) > 1 else ''} {', '.join(names)}"


@dataclass(frozen=True)
class NodeShape:
    """Nodes of one pool that look alike: devices, millicores, MiB, how many."""

    gpus: int
    cpu: int
    memory: int
    count: int

    def holds(self, gpu: int, cpu: int, memory: int) -> int:
        """How many replicas of (milli-GPU, millicores, MiB) one such node takes at once."""
        most = UNBOUNDED
        if gpu >= MILLI:
            most = self.gpus // (gpu // MILLI)
        elif gpu > 0:
            most = self.gpus * (MILLI // gpu)
        if cpu > 0:
            most = min(most, self.cpu // cpu)
        if memory > 0:
            most = min(most, self.memory // memory)
        return most


def node_shapes(node_pools: Sequence[NodePool]) -> dict[NodePool, list[NodeShape]]:
    """The node shapes of each pool (1 query); a pool without nodes is left out."""
    by_id = {np.pk: np for np in node_pools}
    rows = (
        Node.objects.filter(node_pool_id__in=by_id)
        .values("node_pool_id", "gpus", "cpu", "memory")
        .annotate(n=Count("pk"))
        .order_by()
    )
    shapes: dict[NodePool, list[NodeShape]] = defaultdict(list)
    for r in rows:
        shapes[by_id[r["node_pool_id"]]].append(NodeShape(r["gpus"], r["cpu"], r["memory"], r["n"]))
    return dict(shapes)


def quota_limits(quota: Quota, node_pools: Sequence[NodePool]) -> dict[int, tuple[int, str]]:
    """Per node pool id, the smallest max of the quota's chain and the quota that sets it
    (2 queries); a pool no max limits is left out."""
    tree = {
        pk: (parent, name)
        for pk, parent, name in Quota.objects.filter(
            resource_pool_id=quota.resource_pool_id
        ).values_list("pk", "parent_id", "name")
    }
    chain: list[int] = []
    at: int | None = quota.pk
    while at is not None and at not in chain:
        chain.append(at)
        at = tree[at][0]
    limits: dict[int, tuple[int, str]] = {}
    rows = QuotaResource.objects.filter(
        quota_id__in=chain, node_pool_id__in=[np.pk for np in node_pools], max_gpu__isnull=False
    ).values_list("node_pool_id", "max_gpu", "quota_id")
    for pool_id, limit, quota_id in rows:
        if limit is None:
            continue
        if pool_id not in limits or limit < limits[pool_id][0]:
            limits[pool_id] = (limit, tree[quota_id][1])
    return limits


def _asks(replicas: int, gpu: int) -> str:
    """What a job asks in all: "64 GPUs (8 replicas × 8 GPUs)"."""
    if replicas == 1:
        return gpus(gpu)
    return f"{gpus(gpu * replicas)} ({replicas} replicas × {gpus(gpu)})"


def _check_nodes(shapes: dict[NodePool, list[NodeShape]], gpu: int, cpu: int, memory: int) -> None:
    """Refuse a replica that no node of the pools could hold, naming the largest node."""
    if any(s.holds(gpu, cpu, memory) for ns in shapes.values() for s in ns):
        return
    where = _pools_text(np.name for np in shapes)
    every = [s for ns in shapes.values() for s in ns]
    most_gpus = max(s.gpus for s in every)
    most_cpu = max(s.cpu for s in every)
    most_memory = max(s.memory for s in every)
    if gpu > most_gpus * MILLI or (0 < gpu < MILLI and most_gpus == 0):
        raise DomainError(
            f"GPUs per replica: the job asks {gpus(gpu)} a replica; the largest node in "
            f"{where} has {gpus(most_gpus * MILLI)}.",
            field="gpu",
        )
    if cpu > most_cpu:
        raise DomainError(
            f"CPU per replica: the job asks {cpu / 1000:g} cores a replica; the largest node "
            f"in {where} has {most_cpu / 1000:g}.",
            field="cpu",
        )
    if memory > most_memory:
        raise DomainError(
            f"Memory per replica: the job asks {memory / 1024:g} GiB a replica; the largest "
            f"node in {where} has {most_memory / 1024:g} GiB.",
            field="memory",
        )
    raise DomainError(
        f"GPUs per replica: no node in {where} has {gpus(gpu)}, {cpu / 1000:g} cores and "
        f"{memory / 1024:g} GiB of memory together.",
        field="gpu",
    )


def _check_gang(
    shapes: dict[NodePool, list[NodeShape]], replicas: int, gpu: int, cpu: int, memory: int
) -> list[NodePool]:
    """The pools whose nodes hold all the replicas at once; none is refused."""
    holds = {np: sum(s.holds(gpu, cpu, memory) * s.count for s in ns) for np, ns in shapes.items()}
    room = [np for np, n in holds.items() if n >= replicas]
    if room:
        return room
    where = _pools_text(np.name for np in shapes)
    total = {np: sum(s.gpus * s.count for s in ns) * MILLI for np, ns in shapes.items()}
    most = max(total.values())
    if gpu * replicas > most:
        whose = f"{where} has" if len(shapes) == 1 else f"the largest of {where} has"
        raise DomainError(
            f"Replicas: the job asks {_asks(replicas, gpu)}; {whose} {gpus(most)} in all, and "
            "a job runs within one node pool.",
            field="replicas",
        )
    raise DomainError(
        f"Replicas: the job asks {replicas} replicas of {gpus(gpu)}, {cpu / 1000:g} cores "
        f"and {memory / 1024:g} GiB; the nodes of {where} hold at most "
        f"{max(holds.values())} such replicas at once.",
        field="replicas",
    )


def _check_quota(quota: Quota, pools: list[NodePool], replicas: int, gpu: int) -> None:
    """Refuse a job larger than its quota chain's max in every pool (the max counts In-Quota
    and borrowed GPUs alike, so no idle policy gets past it)."""
    need = gpu * replicas
    limits = quota_limits(quota, pools)
    if any(np.pk not in limits or need <= limits[np.pk][0] for np in pools):
        return
    best = max(pools, key=lambda np: limits[np.pk][0])
    limit, by = limits[best.pk]
    raise DomainError(
        f"Replicas: the job asks {_asks(replicas, gpu)}, but {called(by)} may use at most "
        f"{gpus(limit)} in pool {best.name} (its max, borrowed GPUs included).",
        field="replicas",
    )


def workload_fit_check(
    *,
    quota: Quota,
    kind: str,
    replicas: int,
    gpu: int,
    cpu: int,
    memory: int,
    node_pools: Sequence[NodePool],
) -> None:
    """Refuse, with the numbers, a workload that could never run (see the module's doc)."""
    shapes = node_shapes(node_pools)
    if not shapes:
        return
    _check_nodes(shapes, gpu, cpu, memory)
    if kind != Kind.TRAINING:
        return  # services place replicas one by one; an instance is one replica
    fitting = {np: ns for np, ns in shapes.items() if any(s.holds(gpu, cpu, memory) for s in ns)}
    room = _check_gang(fitting, replicas, gpu, cpu, memory)
    _check_quota(quota, room, replicas, gpu)
