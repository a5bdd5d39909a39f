"""Rows to the core: read the database into a core Snapshot and typed info records."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Sum

from cluster.choices import GpuSharing
from cluster.models import Node, ResourcePool
from jobs.choices import ACTIVE_STATUSES, LIVE_POD_STATUSES, WAITING_STATUSES
from jobs.models import Pod, Workload
from jobs.scheduling import types as core
from jobs.scheduling.fragmentation import Shape, popular_shapes
from quotas.models import Quota, QuotaResource
from workspaces.models import Workspace

UNLIMITED = 10**15  # a max component left unset: no limit on that resource
# The target workload placement expects is learned from the submissions of this window,
# again at each multiple of TARGET_REFRESH seconds (see target_cutoff).
TARGET_DAYS = 7
TARGET_WORKLOADS = 10_000
TARGET_REFRESH = 600


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """An active workload row with the node pools it accepts and its live pods."""

    workload: Workload
    pool_names: tuple[str, ...]
    live_pods: list[Pod]


@dataclass(frozen=True)
class Reading:
    """A snapshot for the core plus the rows its names stand for."""

    snapshot: core.Snapshot
    workloads: dict[str, WorkloadInfo]
    nodes: dict[str, Node]


def core_name(workload: Workload) -> str:
    """Workload names are unique per workspace, so the core knows them as workspace/name."""
    return f"{workload.workspace.name}/{workload.name}"


def _seconds(at: datetime | None) -> float | None:
    return None if at is None else at.timestamp()


def checkpoint_since(workload: Workload) -> datetime | None:
    """Where the work a stop would lose begins: the attempt's last checkpoint, else its start.

    An attempt starts with last_checkpoint_at at its start; a reported checkpoint moves it.
    """
    return workload.last_checkpoint_at or workload.started_at


def lost_gpu_seconds(workload: Workload, *, replicas: int, now: datetime) -> float:
    """GPU-seconds `replicas` of the workload lose if stopped now: the core's work_lost on
    the figures the victim order ranks by."""
    since = _seconds(checkpoint_since(workload))
    return core.work_lost(workload.gpu * replicas, since, now.timestamp())


def _quota(
    quota: Quota, rows: list[QuotaResource], parent_name: str | None, pools: tuple[str, ...]
) -> core.Quota:
    """A quota row, its amounts and its allowed node pools as a core Quota."""
    mins = {r.node_pool.name: core.Resources(r.min_gpu, r.min_cpu, r.min_memory) for r in rows}
    has_max = any(
        r.max_gpu is not None or r.max_cpu is not None or r.max_memory is not None for r in rows
    )
    maxes = None
    if has_max:
        maxes = {
            r.node_pool.name: core.Resources(
                UNLIMITED if r.max_gpu is None else r.max_gpu,
                UNLIMITED if r.max_cpu is None else r.max_cpu,
                UNLIMITED if r.max_memory is None else r.max_memory,
            )
            for r in rows
        }
    return core.Quota(
        name=quota.name,
        parent=parent_name,
        min=mins,
        max=maxes,
        child_preemption=quota.child_preemption,
        lend_idle=quota.lend_idle,
        weight=quota.over_quota_weight,
        queue=quota.queue_strategy,
        pools=pools,
    )


def active_workloads(
    quotas: Mapping[int, Quota] | None = None, statuses: Sequence[str] = ACTIVE_STATUSES
) -> list[WorkloadInfo]:
    """Queued, requeued and running workloads (or those of `statuses`) with their pools and
    live pods (4 queries).

    Pools (sorted) and live pods are grouped here rather than by prefetch_related, which
    builds a queryset per workload and relation (most of a cycle's snapshot time with a few
    hundred active workloads). The rows share one object per workspace and quota (`quotas`:
    those already read) rather than a joined copy each.
    """
    workloads: list[Workload] = list(
        Workload.objects.filter(status__in=statuses).order_by("submitted_at", "pk")
    )
    quotas = dict(quotas or {})
    missing = {w.quota_id for w in workloads} - quotas.keys()
    quotas |= Quota.objects.in_bulk(missing) if missing else {}
    workspaces = Workspace.objects.in_bulk({w.workspace_id for w in workloads})
    # (On PostgreSQL a workspace deleted since the first read took its workloads with it.)
    workloads = [w for w in workloads if w.workspace_id in workspaces]
    for w in workloads:
        w.workspace, w.quota = workspaces[w.workspace_id], quotas[w.quota_id]
    by_id = {w.pk: w for w in workloads}
    pools = _pool_names(list(by_id))
    pods: dict[int, list[Pod]] = defaultdict(list)
    live = Pod.objects.filter(workload_id__in=by_id, status__in=LIVE_POD_STATUSES)
    for pod in live.select_related("node"):
        pod.workload = by_id[pod.workload_id]
        pods[pod.workload_id].append(pod)
    return [WorkloadInfo(w, pools[w.pk], pods[w.pk]) for w in workloads]


def _pool_names(ids: list[int]) -> defaultdict[int, tuple[str, ...]]:
    """The names of the node pools each workload accepts, sorted."""
    pools: dict[int, list[str]] = defaultdict(list)
    through = Workload.node_pools.through
    for workload_id, name in through.objects.filter(workload_id__in=ids).values_list(
        "workload_id", "nodepool__name"
    ):
        pools[workload_id].append(name)
    return defaultdict(tuple, {pk: tuple(sorted(names)) for pk, names in pools.items()})


def to_core_workload(info: WorkloadInfo) -> core.Workload:
    """A workload (fetched by active_workloads) as a core Workload."""
    w = info.workload
    pods = () if w.status in WAITING_STATUSES else info.live_pods
    return core.Workload(
        name=core_name(w),
        quota=w.quota.name,
        kind=w.kind,
        replicas=w.replicas,
        request=core.Resources(w.gpu, w.cpu, w.memory),
        pools=info.pool_names,
        priority=w.priority,
        idle=w.idle_policy,
        running=tuple(
            core.Placement(p.node.name, tuple(p.devices)) for p in pods if p.node is not None
        ),
        submitted_at=w.submitted_at.timestamp(),
        started_at=_seconds(w.started_at),
        last_checkpoint_at=_seconds(checkpoint_since(w)),
        in_quota=w.in_quota,
    )


@dataclass(frozen=True)
class _Cluster:
    """Nodes and the quota tree, as rows and as the core's types."""

    nodes: dict[str, Node]
    quotas: list[Quota]
    core_nodes: tuple[core.Node, ...]
    core_quotas: tuple[core.Quota, ...]
    idle_scope: str


def _core_node(n: Node, now: datetime) -> core.Node:
    """A node row as the core sees it: cooling down after a kubelet refusal takes no new pods."""
    cooling = n.cooldown_until is not None and n.cooldown_until > now
    return core.Node(
        n.name,
        n.node_pool.name,
        n.gpus,
        n.cpu,
        n.memory,
        n.schedulable and not cooling,
        shares_gpus=GpuSharing.shares(n.gpu_sharing),
        whole_gpus=GpuSharing.whole(n.gpu_sharing),
    )


def _cluster(now: datetime) -> _Cluster:
    """Read the nodes, the quotas with their amounts and node pools, the idle scope (5 queries)."""
    nodes = {n.name: n for n in Node.objects.select_related("node_pool")}
    quotas = list(Quota.objects.select_related("parent"))
    rows: dict[int, list[QuotaResource]] = {}
    for r in QuotaResource.objects.select_related("node_pool"):
        rows.setdefault(r.quota_id, []).append(r)
    allowed: dict[int, list[str]] = {}
    through = Quota.allowed_node_pools.through.objects.order_by("nodepool__name")
    for quota_id, name in through.values_list("quota_id", "nodepool__name"):
        allowed.setdefault(quota_id, []).append(name)
    pool = ResourcePool.objects.order_by("pk").first()
    return _Cluster(
        nodes,
        quotas,
        tuple(_core_node(n, now) for n in nodes.values()),
        tuple(
            _quota(
                q,
                rows.get(q.pk, []),
                q.parent.name if q.parent else None,
                tuple(allowed.get(q.pk, ())),
            )
            for q in quotas
        ),
        pool.idle_scope if pool else "tree",
    )


def target_cutoff(now: datetime) -> datetime:
    """The end of the window the target is learned from (submissions before it): the last
    multiple of TARGET_REFRESH seconds at or before now. Nothing submitted since can fall in
    the window.

    Between two such times the target stays the same, so the core keeps its fragmentation
    scorer, which ranks nodes under the target, from one cycle to the next. A target that
    changed with every submission would start the scorer over in nearly every cycle of a busy
    cluster, and such a cycle takes 1.6 to 1.8 times as long (bench/cycle.py --drift).
    """
    at = now.timestamp()
    return datetime.fromtimestamp(at - at % TARGET_REFRESH, tz=UTC)


def learned_target(now: datetime) -> tuple[Shape, ...]:
    """The task shapes of the latest submissions (the last TARGET_WORKLOADS of the
    TARGET_DAYS days up to target_cutoff), each weighted by its tasks (replicas), in one
    aggregate query.

    Empty when nothing with a GPU was submitted: the core then uses its DEFAULT_TARGET.
    """
    cutoff = target_cutoff(now)
    recent = (
        Workload.objects.filter(
            submitted_at__gte=cutoff - timedelta(days=TARGET_DAYS), submitted_at__lt=cutoff
        )
        .order_by("-submitted_at", "-pk")
        .values("pk")[:TARGET_WORKLOADS]
    )
    rows = (
        Workload.objects.filter(pk__in=recent, gpu__gt=0)
        .values_list("gpu", "cpu", "memory")
        .annotate(tasks=Sum("replicas"))
        .order_by()
    )
    return popular_shapes((g, c, m, n or 0) for g, c, m, n in rows)


def build(now: datetime) -> Reading:
    """Snapshot the database for one cycle in a fixed number of queries."""
    cluster = _cluster(now)
    workloads = active_workloads({q.pk: q for q in cluster.quotas})
    # A service scaled to zero holds nothing and asks for nothing: the core never sees it.
    workloads = [i for i in workloads if i.workload.replicas or i.live_pods]
    snapshot = core.Snapshot(
        now=now.timestamp(),
        nodes=cluster.core_nodes,
        quotas=cluster.core_quotas,
        workloads=tuple(to_core_workload(i) for i in workloads),
        idle_scope=cluster.idle_scope,
        target=learned_target(now),
        placement=settings.TIDEPOOL_PLACEMENT,
    )
    return Reading(snapshot, {core_name(i.workload): i for i in workloads}, cluster.nodes)
