"""Usage where decisions are made: the quota tree's usage per node pool, the headroom an Add
form shows, and the overview members read of a quota bound to their workspace.

Each reader makes a fixed number of queries, whatever the number of jobs (a bench runs the
tree with 10,000); the sums up the tree happen in Python on narrow rows.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Case, Count, F, Min, OuterRef, Q, Subquery, Sum, Value, When

from cluster.models import NodePool
from console.units import milli_to_gpus
from jobs.choices import LIVE_POD_STATUSES, WAITING_STATUSES, EventKind, Kind
from jobs.models import Pod, Workload, WorkloadEvent
from quotas.amounts import RESOURCES, Amounts
from quotas.models import Quota, QuotaResource
from quotas.selectors import (
    PoolTree,
    QuotaRow,
    quota_amounts,
    quota_pools_in_effect,
    quota_subtree_ids,
    quota_tree_by_pool,
    row_amounts,
)
from quotas.services.quotas import pool_capacity
from workspaces.models import Workspace

NO_NODE = "—"


@dataclass
class PoolLine:
    """One quota's subtree on one node pool: its amounts and what it holds and waits for.

    In Quota and borrowed count live pods (a pod's `borrowed` follows its workload's label);
    pending counts the requests of waiting workloads that accept only this node pool. All
    milli-GPU; a workload counts against its quota and every ancestor.
    """

    node_pool: str
    amounts: Amounts | None = None
    in_quota: int = 0
    borrowed: int = 0
    pending: int = 0

    @property
    def guaranteed(self) -> int:
        """The quota's min GPUs on the pool (0 without a row)."""
        return self.amounts.min_gpu if self.amounts else 0

    @property
    def limit(self) -> int | None:
        """The quota's max GPUs on the pool; None is no limit."""
        return self.amounts.max_gpu if self.amounts else None

    @property
    def used(self) -> int:
        """What the subtree holds on the pool, In Quota and borrowed."""
        return self.in_quota + self.borrowed

    def _scale(self) -> int:
        """The bar's full width: the guarantee, or what is held if that is more."""
        return max(self.guaranteed, self.used, 1)

    @property
    def in_quota_pct(self) -> int:
        """The In-Quota part of the bar, in percent of its width."""
        return round(100 * self.in_quota / self._scale())

    @property
    def borrowed_pct(self) -> int:
        """The borrowed part of the bar, in percent of its width."""
        return min(100 - self.in_quota_pct, round(100 * self.borrowed / self._scale()))


@dataclass
class QuotaUsage:
    """A quota subtree's usage: per node pool, and the pending requests open to several pools."""

    pools: dict[str, PoolLine] = field(default_factory=dict)
    pending_any: int = 0
    pending_jobs: int = 0

    def line(self, node_pool: str) -> PoolLine:
        """The pool's line, made on first use."""
        found = self.pools.get(node_pool)
        if found is None:
            found = self.pools[node_pool] = PoolLine(node_pool)
        return found

    @property
    def pending(self) -> int:
        """Every pending milli-GPU, whichever pool it waits for."""
        return self.pending_any + sum(p.pending for p in self.pools.values())


def usage_by_quota(*, quota_ids: Collection[int] | None = None) -> dict[int, QuotaUsage]:
    """Every quota's subtree usage per node pool, in 3 queries whatever the number of jobs.

    `quota_ids` counts only the workloads of those quotas (a subtree, when only its top is
    read). A waiting workload that accepts exactly one node pool is pending on it; one that
    accepts several (or any) is `pending_any`.
    """
    return usage_split(quota_ids=quota_ids)[0]


def usage_split(
    *, quota_ids: Collection[int] | None = None, workspace_id: int | None = None
) -> tuple[dict[int, QuotaUsage], dict[int, QuotaUsage]]:
    """usage_by_quota, and the same counting only `workspace_id`'s workloads (empty without
    one), from the same 3 queries."""
    parent: dict[int, int | None] = dict(Quota.objects.values_list("pk", "parent_id"))
    own: dict[int, QuotaUsage] = {pk: QuotaUsage() for pk in parent}
    ours: dict[int, QuotaUsage] = {pk: QuotaUsage() for pk in parent}
    pods = Pod.objects.filter(status__in=LIVE_POD_STATUSES)
    waiting = Workload.objects.filter(status__in=WAITING_STATUSES)
    if quota_ids is not None:
        pods = pods.filter(workload__quota_id__in=quota_ids)
        waiting = waiting.filter(quota_id__in=quota_ids)
    live: Any = (
        pods.values_list(
            "workload__quota_id", "node__node_pool__name", "borrowed", "workload__workspace_id"
        )
        .annotate(gpu=Sum("workload__gpu"))
        .order_by()
    )
    for quota_id, pool_name, borrowed, workspace, gpu in live:
        if quota_id not in own:  # created after the tree was read
            continue
        for usage in (own, ours) if workspace == workspace_id else (own,):
            line = usage[quota_id].line(pool_name or NO_NODE)
            if borrowed:
                line.borrowed += gpu or 0
            else:
                line.in_quota += gpu or 0
    # The node pool a waiting workload waits for, if it accepts exactly one; summed in SQL so
    # thousands of waiting jobs come back as a row per quota and pool.
    through = Workload.node_pools.through.objects.filter(workload_id=OuterRef("pk")).order_by()
    per_workload = through.values("workload_id")
    accepts = Subquery(per_workload.annotate(n=Count("pk")).values("n")[:1])  # type: ignore[misc]
    first = Subquery(
        per_workload.annotate(first=Min("nodepool__name")).values("first")[:1]  # type: ignore[misc]
    )
    rows: Any = (
        waiting.annotate(accepts=accepts, first=first)
        .annotate(one_pool=Case(When(Q(accepts=1), then=F("first")), default=Value(None)))
        .values_list("quota_id", "one_pool", "workspace_id")
        .annotate(gpu=Sum(F("gpu") * F("replicas")), jobs=Count("pk"))
        .order_by()
    )
    for quota_id, pool_name, workspace, gpu, jobs in rows:
        if quota_id not in own:
            continue
        for usage in (own, ours) if workspace == workspace_id else (own,):
            into = usage[quota_id]
            into.pending_jobs += jobs
            if pool_name is not None:
                into.line(pool_name).pending += gpu or 0
            else:
                into.pending_any += gpu or 0
    return _up_the_tree(own, parent), _up_the_tree(ours, parent)


def _up_the_tree(
    own: dict[int, QuotaUsage], parent: dict[int, int | None]
) -> dict[int, QuotaUsage]:
    """Each quota's own usage added to itself and every ancestor."""
    total: dict[int, QuotaUsage] = {pk: QuotaUsage() for pk in parent}
    for pk, usage in own.items():
        if not usage.pools and not usage.pending_jobs:
            continue
        node: int | None = pk
        while node is not None:
            into = total[node]
            into.pending_any += usage.pending_any
            into.pending_jobs += usage.pending_jobs
            for name, line in usage.pools.items():
                mine = into.line(name)
                mine.in_quota += line.in_quota
                mine.borrowed += line.borrowed
                mine.pending += line.pending
            node = parent[node]
    return total


@dataclass
class UsageRow:
    """A row of the quota tree with its subtree's usage on each node pool."""

    row: QuotaRow
    pools: list[PoolLine]
    pending_any: int
    pending_jobs: int

    @property
    def quota(self) -> Quota:
        """The row's quota."""
        return self.row.quota


@dataclass
class UsageTree:
    """A resource pool's quota tree with usage, and which resources any of its quotas sets."""

    tree: PoolTree
    rows: list[UsageRow]
    show_cpu: bool
    show_memory: bool

    @property
    def columns(self) -> int:
        """The table's column count, for a full-width row."""
        return 6 + self.show_cpu + self.show_memory


def _sets(amounts: Iterable[Amounts], resource: str) -> bool:
    """Whether any amount guarantees or limits `resource`."""
    return any(a.min(resource) or a.max(resource) is not None for a in amounts)


def quota_tree_usage() -> list[UsageTree]:
    """The quota tree of every resource pool with each quota's usage (a fixed number of queries).

    Each row lists the node pools the quota has amounts on, then any other pool its subtree
    holds GPUs on, in the resource pool's order.
    """
    usage = usage_by_quota()
    result = []
    for tree in quota_tree_by_pool():
        order = {np.name: i for i, np in enumerate(tree.node_pools)}
        rows = []
        for row in tree.rows:
            held = usage.get(row.quota.pk, QuotaUsage())
            names = sorted(
                set(row.amounts) | set(held.pools), key=lambda n: (order.get(n, len(order)), n)
            )
            lines = []
            for name in names:
                line = held.pools.get(name) or PoolLine(name)
                line.amounts = row.amounts.get(name)
                lines.append(line)
            rows.append(UsageRow(row, lines, held.pending_any, held.pending_jobs))
        amounts = [a for row in tree.rows for a in row.amounts.values()]
        result.append(UsageTree(tree, rows, _sets(amounts, "cpu"), _sets(amounts, "memory")))
    return result


@dataclass
class PoolRoom:
    """What a new quota may guarantee on one node pool, and what runs there now (milli-GPU,
    millicores, MiB).

    `room` is what is left: the parent's min less its children's, or for a root quota the
    pool's capacity less the root quotas'. `in_quota` and `borrowed` are the parent subtree's
    (a root quota: every workload on the pool).
    """

    node_pool: NodePool
    guaranteed: dict[str, int]
    given: dict[str, int]
    in_quota: int = 0
    borrowed: int = 0

    @property
    def room(self) -> dict[str, int]:
        """What is left to guarantee, per resource."""
        return {r: max(self.guaranteed[r] - self.given[r], 0) for r in RESOURCES}


def form_headroom(*, parent: Quota | None, node_pools: list[NodePool]) -> list[PoolRoom]:
    """Per node pool of an Add form: the parent's (or the pool's) guarantee, what its children
    (or the root quotas) already hold of it, and what runs there now (a few queries)."""
    pool_ids = [np.pk for np in node_pools]
    zero = {r: 0 for r in RESOURCES}
    sums = {r: Sum(f"min_{r}") for r in RESOURCES}
    siblings = QuotaResource.objects.filter(node_pool_id__in=pool_ids, quota__parent=parent)
    given: dict[int, dict[str, int]] = {}
    rows: Any = siblings.values_list("node_pool_id").annotate(**sums).order_by()
    for pool_id, *mins in rows:
        given[pool_id] = {r: int(v or 0) for r, v in zip(RESOURCES, mins, strict=True)}
    pods = Pod.objects.filter(status__in=LIVE_POD_STATUSES, node__node_pool_id__in=pool_ids)
    if parent is not None:
        owned = quota_amounts(parent)
        guaranteed = {
            pk: {r: owned.get(pk, Amounts()).min(r) for r in RESOURCES} for pk in pool_ids
        }
        pods = pods.filter(workload__quota_id__in=quota_subtree_ids(parent))
    else:  # a root quota shares the schedulable capacity of its resource pool
        guaranteed = {}
        for resource_pool in {np.resource_pool for np in node_pools}:
            guaranteed.update(pool_capacity(resource_pool))
    held: dict[tuple[int, bool], int] = {}
    by_pool = pods.values_list("node__node_pool_id", "borrowed").annotate(gpu=Sum("workload__gpu"))
    for pool_id, borrowed, gpu in by_pool.order_by():
        held[(pool_id, borrowed)] = gpu or 0
    return [
        PoolRoom(
            node_pool=np,
            guaranteed=guaranteed.get(np.pk, zero),
            given=given.get(np.pk, zero),
            in_quota=held.get((np.pk, False), 0),
            borrowed=held.get((np.pk, True), 0),
        )
        for np in node_pools
    ]


# --- what a member reads of a quota bound to their workspace ------------------------------------

# How far back the overview tells of preemptions, by the cluster's clock.
PREEMPTION_WINDOW = timedelta(hours=24)
# The most preemption entries read; older ones in the window are left out.
PREEMPTIONS_READ = 200
KIND_NOUN: dict[str, tuple[str, str]] = {
    Kind.TRAINING: ("training job", "training jobs"),
    Kind.INFERENCE: ("inference service", "inference services"),
    Kind.INTERACTIVE: ("interactive instance", "interactive instances"),
}


def _gpus_text(milli: int) -> str:
    """GPUs as a sentence says them: 1 GPU, 24 GPUs, 0.5 GPUs."""
    return "1 GPU" if milli == 1000 else f"{milli_to_gpus(milli)} GPUs"


@dataclass(frozen=True)
class WaitReason:
    """Why some of the workspace's jobs wait: the scheduler's sentence, how many, how much."""

    sentence: str
    jobs: int
    gpu: int


@dataclass(frozen=True)
class PreemptionEpisode:
    """GPUs the quota's jobs lost at one moment to one kind of preemption by one quota's
    workloads (the preemptor's quota and kind; its name is another team's to know)."""

    at: datetime
    reason: str
    by_quota: str | None
    by_kind: str | None
    preemptors: int
    gpu: int
    jobs: int
    mine: int

    @property
    def sentence(self) -> str:
        """E.g. "Quota 1's inference service took 24 GPUs back by child-level preemption"."""
        amount = _gpus_text(self.gpu)
        if self.by_quota is None or self.by_kind is None:
            return f"{amount} were preempted ({self.reason.replace('_', ' ')})"
        single, plural = KIND_NOUN.get(self.by_kind, ("workload", "workloads"))
        who = f"{self.by_quota}'s {single if self.preemptors == 1 else plural}"
        if self.reason == "child_preemption":
            return f"{who} took {amount} back by child-level preemption"
        if self.reason == "reclaim":
            return f"{who} reclaimed {amount} that ran on borrowed capacity"
        if self.reason == "priority":
            one = self.preemptors == 1
            higher = f"a higher-priority {single}" if one else f"higher-priority {plural}"
            return f"{higher} in {self.by_quota} preempted {amount}"
        if self.reason == "fair_share":
            return f"{who} took {amount} of borrowed capacity by fair-share reclaim"
        if self.reason == "min":
            return f"{who} took {amount} that a smaller min had left Not in Quota"
        return f"{who} preempted {amount} ({self.reason.replace('_', ' ')})"

    @property
    def jobs_text(self) -> str:
        """Whose jobs they were: 3 jobs, 2 of this workspace."""
        jobs = "1 job" if self.jobs == 1 else f"{self.jobs} jobs"
        if self.mine == self.jobs:
            return (
                f"{jobs} of this workspace" if self.jobs == 1 else f"{jobs}, all of this workspace"
            )
        if not self.mine:
            return f"{jobs} of other workspaces"
        return f"{jobs}, {self.mine} of this workspace"


@dataclass
class MemberQuotaOverview:
    """A quota as a member of a bound workspace sees it: guaranteed, in use, borrowed and
    pending per node pool (the whole subtree, and the workspace's part), why the workspace's
    jobs wait, and recent preemptions of the quota's jobs."""

    quota: Quota
    pools: list[PoolLine]
    mine: dict[str, PoolLine]
    pending_any: int
    mine_pending_any: int
    waits: list[WaitReason]
    preemptions: list[PreemptionEpisode]
    pools_in_effect: list[str] | None
    has_descendants: bool

    @property
    def guaranteed(self) -> int:
        """The quota's min GPUs over every pool."""
        return sum(p.guaranteed for p in self.pools)

    @property
    def in_quota(self) -> int:
        """GPUs the subtree holds In Quota."""
        return sum(p.in_quota for p in self.pools)

    @property
    def borrowed(self) -> int:
        """GPUs the subtree holds Not in Quota."""
        return sum(p.borrowed for p in self.pools)

    @property
    def pending(self) -> int:
        """GPUs the subtree's waiting workloads ask for."""
        return self.pending_any + sum(p.pending for p in self.pools)


def member_quota_overview(
    *, quota: Quota, workspace: Workspace, now: datetime
) -> MemberQuotaOverview:
    """The member's read-only overview of `quota` (a fixed number of queries)."""
    subtree = quota_subtree_ids(quota)
    all_usage, our_usage = usage_split(quota_ids=subtree, workspace_id=workspace.pk)
    everyone = all_usage.get(quota.pk, QuotaUsage())
    ours = our_usage.get(quota.pk, QuotaUsage())
    amounts = {
        row.node_pool.name: row_amounts(row)
        for row in QuotaResource.objects.filter(quota=quota).select_related("node_pool")
    }
    lines = []
    for name in sorted(set(amounts) | set(everyone.pools)):
        line = everyone.pools.get(name) or PoolLine(name)
        line.amounts = amounts.get(name)
        lines.append(line)
    in_effect = quota_pools_in_effect(quota)
    return MemberQuotaOverview(
        quota=quota,
        pools=lines,
        mine=ours.pools,
        pending_any=everyone.pending_any,
        mine_pending_any=ours.pending_any,
        waits=_wait_reasons(workspace, subtree),
        preemptions=_preemptions(workspace, subtree, since=now - PREEMPTION_WINDOW),
        pools_in_effect=None if in_effect is None else sorted(in_effect.values()),
        has_descendants=len(subtree) > 1,
    )


def _wait_reasons(workspace: Workspace, subtree: list[int]) -> list[WaitReason]:
    """The workspace's waiting jobs in the subtree grouped by the scheduler's sentence, most
    jobs first (1 query)."""
    rows: Any = (
        Workload.objects.filter(
            workspace=workspace, quota_id__in=subtree, status__in=WAITING_STATUSES
        )
        .values_list("pending_reason")
        .annotate(jobs=Count("pk"), gpu=Sum(F("gpu") * F("replicas")))
        .order_by("-jobs", "pending_reason")
    )
    return [
        WaitReason(reason or "Waiting for the scheduler's next cycle.", jobs, gpu or 0)
        for reason, jobs, gpu in rows[:10]
    ]


def _preemptions(
    workspace: Workspace, subtree: list[int], *, since: datetime
) -> list[PreemptionEpisode]:
    """Preemptions of the subtree's jobs since `since`, newest first, one entry per moment,
    reason and preempting quota and kind (2 queries).

    The victim's entry names its preemptor's workload; the preemptor's own entry, written at
    the same moment, names the victim: together they give the preemptor's quota and kind.
    """
    victims: Any = (
        WorkloadEvent.objects.filter(
            kind=EventKind.PREEMPTED, at__gt=since, workload__quota_id__in=subtree
        )
        .order_by("-at", "-id")
        .values_list(
            "at",
            "data",
            "workload__name",
            "workload__workspace_id",
            "workload__gpu",
            "workload__replicas",
        )[:PREEMPTIONS_READ]
    )
    victims = list(victims)
    if not victims:
        return []
    moments = {at for at, *_ in victims}
    preemptors: dict[tuple[datetime, str], tuple[str, str, int]] = {}
    rows: Any = WorkloadEvent.objects.filter(kind=EventKind.PREEMPTOR, at__in=moments).values_list(
        "at", "data", "workload__quota__name", "workload__kind", "workload_id"
    )
    for at, data, quota_name, kind, workload_id in rows:
        victim = (data or {}).get("victim")
        if victim:
            preemptors[(at, victim)] = (quota_name, kind, workload_id)
    episodes: dict[tuple[Any, ...], dict[str, Any]] = {}
    for at, data, name, workspace_id, gpu, replicas in victims:
        reason = (data or {}).get("reason", "")
        by_quota, by_kind, by_id = preemptors.get((at, name), (None, None, None))
        key = (at, reason, by_quota, by_kind)
        entry = episodes.setdefault(key, {"gpu": 0, "jobs": 0, "mine": 0, "by": set()})
        entry["gpu"] += gpu * replicas
        entry["jobs"] += 1
        entry["mine"] += workspace_id == workspace.pk
        if by_id is not None:
            entry["by"].add(by_id)
    return [
        PreemptionEpisode(
            at=at,
            reason=reason,
            by_quota=by_quota,
            by_kind=by_kind,
            preemptors=max(len(e["by"]), 1),
            gpu=e["gpu"],
            jobs=e["jobs"],
            mine=e["mine"],
        )
        for (at, reason, by_quota, by_kind), e in episodes.items()
    ]
