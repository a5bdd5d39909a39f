"""Mutable working state of one cycle: free devices per node, quota usage, running entries."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from operator import attrgetter
from typing import TYPE_CHECKING, Final

from .fragmentation import DEFAULT_TARGET, FragmentationScorer, new_owner, shared_scorer
from .tree import QuotaTree, Vec, add_row
from .types import MILLI, PLACEMENTS, Placement, ScenarioError, Snapshot, Workload, work_lost

if TYPE_CHECKING:
    from .preemption.base import Window

_KEY = attrgetter("key")  # an entry's victim key once set, without a Python-level call
LEVEL: Final = 50  # partial devices are bucketed in steps of 50 milli-GPU
LEVELS: Final = MILLI // LEVEL


class NodeState:
    """Free capacity of one node, per GPU device."""

    __slots__ = (
        "name",
        "pool",
        "dev",
        "cpu",
        "mem",
        "cpu_total",
        "mem_total",
        "full",
        "levels",
        "residents",
        "schedulable",
        "freed",
        "shares",
        "whole",
    )

    def __init__(self, name: str, pool: str, gpus: int, cpu: int, mem: int, sched: bool) -> None:
        self.name = name
        self.pool = pool
        self.dev = [MILLI] * gpus
        self.cpu = cpu
        self.mem = mem
        self.cpu_total = cpu
        self.mem_total = mem
        self.full = gpus
        # buckets (free // LEVEL) of the partially used devices, for best-fit GPU sharing
        self.levels: frozenset[int] = frozenset()
        # workload name -> replicas it runs here, so victims are found per node
        self.residents: dict[str, int] = {}
        self.schedulable = sched
        # times capacity was given back here: a victim search that failed stays failed
        # while no node it looked at gained capacity (see preemption.base)
        self.freed = 0
        self.shares = True  # takes fractions of a GPU (types.Node.shares_gpus)
        self.whole = True  # takes whole GPUs (types.Node.whole_gpus)

    def free_gpu(self) -> int:
        """Total free milli-GPU over the devices."""
        return sum(self.dev)

    def refresh(self, index: PoolIndex | None) -> None:
        """Recompute the cached counters and move the node between the buckets of its pool's
        index (None for a node that is not indexed). A node holds no link to its index, so a
        cycle's working state is freed as soon as it is dropped, without the cyclic GC."""
        full = 0
        levels: set[int] = set()
        for d in self.dev:
            if d == MILLI:
                full += 1
            elif d >= LEVEL:
                levels.add(d // LEVEL)
        frozen = frozenset(levels)
        if index is not None and (full != self.full or frozen != self.levels):
            index.move(self, full, frozen)
        self.full = full
        self.levels = frozen


class PoolIndex:
    """Nodes of one pool bucketed by whole free devices and by their partial devices."""

    __slots__ = ("pool", "by_full", "by_level", "nodes")

    def __init__(self, pool: str, max_gpus: int) -> None:
        self.pool = pool
        # dicts keep insertion order, so scans are deterministic
        self.by_full: list[dict[str, NodeState]] = [{} for _ in range(max_gpus + 1)]
        self.by_level: list[dict[str, NodeState]] = [{} for _ in range(LEVELS)]
        self.nodes: dict[str, NodeState] = {}

    def move(self, n: NodeState, full: int, levels: frozenset[int]) -> None:
        """Re-bucket a node whose free devices changed."""
        if full != n.full:
            del self.by_full[n.full][n.name]
            self.by_full[full][n.name] = n
        for lv in n.levels - levels:
            del self.by_level[lv][n.name]
        for lv in levels - n.levels:
            self.by_level[lv][n.name] = n


class Entry:
    """A running workload inside the working state."""

    __slots__ = (
        "w",
        "placements",
        "in_quota",
        "pool_counts",
        "req",
        "key",
        "okey",
        "why",
        "why_quota",
    )

    def __init__(self, w: Workload, placements: list[Placement], in_quota: bool) -> None:
        self.w = w
        self.placements = placements
        self.in_quota = in_quota
        self.pool_counts: dict[str, int] = {}
        r = w.request
        self.req: Vec = (r.gpu, r.cpu, r.memory)
        # cached victim-preference key; reset when the label changes
        self.key: tuple[int, bool, float, float, str] | None = None
        # classification order key (see classify.rank), set when a walk needs the order
        self.okey: tuple[bool, int, float, float, str] | None = None
        # why a Not-in-Quota entry is Not in Quota, the reason its eviction will give:
        # "reclaim" (it borrows), "min" or "child_preemption" (it lost its In-Quota label),
        # and the quota that reason names (see classify)
        self.why = ""
        self.why_quota = ""


class State:
    """The cycle's working snapshot; it can remove a workload and restore it."""

    def __init__(self, snap: Snapshot) -> None:
        # the loader builds on this module's types, so it is imported when first needed
        from .loading import Loader, check_workload

        if snap.idle_scope not in ("tree", "pool"):
            raise ScenarioError(f"idle_scope must be tree or pool, not {snap.idle_scope!r}")
        if snap.placement not in PLACEMENTS:
            raise ScenarioError(f"placement must be fgd or bestfit, not {snap.placement!r}")
        self.now = snap.now
        self.placement = snap.placement
        self.target = snap.target or DEFAULT_TARGET
        # the fragmentation scorer, built at the first placement; nodes changed since its
        # last look are re-filed before the next one
        self._scorer: FragmentationScorer | None = None
        self._serial = new_owner()
        self._changed: dict[str, NodeState] = {}
        self.idle_scope = snap.idle_scope
        self.tree = QuotaTree(snap.quotas)
        self.nodes: dict[str, NodeState] = {}
        self.pools: dict[str, PoolIndex] = {}
        self.capacity: dict[str, list[int]] = {}
        max_gpus: dict[str, int] = {}
        for n in snap.nodes:
            if n.name in self.nodes:
                raise ScenarioError(f"node {n.name!r} is defined twice")
            if n.gpus < 0 or n.cpu < 0 or n.memory < 0:
                raise ScenarioError(f"node {n.name!r} has negative capacity")
            ns = NodeState(n.name, n.pool, n.gpus, n.cpu, n.memory, n.schedulable)
            ns.shares, ns.whole = n.shares_gpus, n.whole_gpus
            self.nodes[n.name] = ns
            max_gpus[n.pool] = max(max_gpus.get(n.pool, 0), n.gpus)
        indexed: list[NodeState] = []
        for name in sorted(self.nodes):
            ns = self.nodes[name]
            if ns.pool not in self.pools:
                self.pools[ns.pool] = PoolIndex(ns.pool, max_gpus[ns.pool])
                self.capacity[ns.pool] = [0, 0, 0]
            if ns.schedulable:
                indexed.append(ns)
                cap = self.capacity[ns.pool]
                add_row(cap, len(ns.dev) * MILLI, ns.cpu, ns.mem)
        # (quota, pool) -> subtree usage; in-quota subtree usage; in-quota usage submitted
        # directly to the quota; Not-in-Quota GPU submitted directly (fair share).
        self.usage: dict[tuple[str, str], list[int]] = {}
        self.inq: dict[tuple[str, str], list[int]] = {}
        self.direct_inq: dict[tuple[str, str], list[int]] = {}
        self.borrowed: dict[tuple[str, str], int] = {}
        self.pool_used: dict[str, list[int]] = {p: [0, 0, 0] for p in self.pools}
        self.entries: dict[str, Entry] = {}
        # the running entries per submission quota, and per quota and pool the usage of
        # those that may be In Quota (all but idle_only), for the classification
        self.by_quota: dict[str, dict[str, Entry]] = {q: {} for q in self.tree.quotas}
        self.claims: dict[str, dict[str, list[int]]] = {q: {} for q in self.tree.quotas}
        # running training (the only possible victims) per (submission quota, pool), and the
        # Not-in-Quota ones among them, so victim searches never scan the whole running set
        self.train_at: dict[tuple[str, str], dict[str, Entry]] = {}
        self.niq_at: dict[tuple[str, str], dict[str, Entry]] = {}
        # how many of train_at's entries run at each priority, once asked (see lowest_priority)
        self.priorities: dict[tuple[str, str], dict[int, int]] = {}
        # per submission quota, the Not-in-Quota entries that may become In Quota (all but
        # idle_only), so the search for ones whose quota has room never scans the running set
        self.upgradable: dict[str, dict[str, Entry]] = {q: {} for q in self.tree.quotas}
        # victim groups sorted by preference, built on first use (see preemption.base)
        self.victim_cache: dict[tuple[str, str, bool], list[Entry]] = {}
        self.bound_cache: dict[tuple[str, str, int], int] = {}
        # several groups merged in preference order, and which merged lists hold each group
        self.merged_cache: dict[tuple[str, tuple[tuple[str, bool], ...]], list[Entry]] = {}
        self.merged_by_group: dict[tuple[str, str, bool], list[list[Entry]]] = {}
        # first candidates of victim streams, per (pool, groups, priority bound, preemptor),
        # and the windows drawn from each group: a change to a possible victim drops the
        # windows it can affect (see touch)
        self.windows: dict[tuple[object, ...], Window] = {}
        self.window_groups: dict[tuple[str, str, bool], list[Window]] = {}
        # workloads started this cycle; a victim among them is displaced (its admission is
        # withdrawn and it waits again), unless it already evicted someone (shielded): then
        # only by a preemptor that may take its victims too (see preemption.base._eligible)
        self.fresh: set[str] = set()
        self.shielded: set[str] = set()
        # the shielded preemptors that evicted a workload running In Quota
        self.took_in_quota: set[str] = set()
        # each walked quota's In-Quota entries in classification order, as its last walk
        # sorted them (see classify)
        self.walk_order: dict[str, list[Entry]] = {}
        # each quota's upgradable entries in that order, as the last upgrade sorted them
        self.up_order: dict[str, list[Entry]] = {}
        # how often In-Quota usage was given back (an entry removed or relabelled Not in
        # Quota): while it stands, no Not-in-Quota entry can have found room since the last
        # look (see classify.upgrade); and its count as a round's In-Quota attempts began
        self.inq_freed = 0
        self.upgrade_seen = -1
        self.tried_freed = 0
        # a clock of changes, and per pool the time of its last change (usage, labels, free
        # room): an attempt whose pools have not changed since cannot end otherwise
        self.tick = 0
        self.changed: dict[str, int] = {}
        self.workloads: dict[str, Workload] = {}
        for w in snap.workloads:
            if w.name in self.workloads:
                raise ScenarioError(f"workload {w.name!r} is defined twice")
            if w.quota not in self.tree.quotas:
                raise ScenarioError(f"workload {w.name!r} names unknown quota {w.quota!r}")
            check_workload(w)
            self.workloads[w.name] = w
        # Load in name order: the node buckets keep insertion order, so the snapshot's order
        # must not leak into placement ties.
        loader = Loader(self, indexed)
        for name in sorted(self.workloads):
            w = self.workloads[name]
            if w.running:
                loader.load(w)
        loader.finish()

    def _changed_free(self, ns: NodeState) -> None:
        """After a node's free resources changed: its counters and buckets, and the scorer's
        note to re-file it."""
        ns.refresh(self.pools[ns.pool] if ns.schedulable else None)
        if self._scorer is not None:
            self._changed[ns.name] = ns

    def _take(self, ns: NodeState, req: Vec, devices: tuple[int, ...], owner: str) -> None:
        share = req[0] if req[0] < MILLI else MILLI
        for i in devices:
            ns.dev[i] -= share
        ns.cpu -= req[1]
        ns.mem -= req[2]
        ns.residents[owner] = ns.residents.get(owner, 0) + 1
        self._changed_free(ns)

    def _give(self, ns: NodeState, req: Vec, devices: tuple[int, ...], owner: str) -> None:
        ns.freed += 1
        share = req[0] if req[0] < MILLI else MILLI
        for i in devices:
            ns.dev[i] += share
        ns.cpu += req[1]
        ns.mem += req[2]
        left = ns.residents[owner] - 1
        if left:
            ns.residents[owner] = left
        else:
            del ns.residents[owner]
        self._changed_free(ns)

    def _account(self, e: Entry, sign: int, counts: dict[str, int] | None = None) -> None:
        """Add (sign=1) or remove (sign=-1) an entry's usage along its quota chain: all of
        it, or only `counts` replicas per pool."""
        w = e.w
        if counts is None:
            counts = e.pool_counts
        chain = self.tree.chain[w.quota]
        g, c, m = e.req
        if w.kind == "training":
            for pool in counts:
                k = (w.quota, pool)
                if sign > 0:
                    by = self.train_at.get(k)
                    if by is None:
                        by = self.train_at[k] = {}
                    if w.name not in by:
                        at = self.priorities.get(k)
                        if at is not None:
                            at[w.priority] = at.get(w.priority, 0) + 1
                    by[w.name] = e
                    if not e.in_quota:
                        by = self.niq_at.get(k)
                        if by is None:
                            by = self.niq_at[k] = {}
                        by[w.name] = e
                else:
                    at = self.priorities.get(k)
                    if self.train_at[k].pop(w.name, None) is not None and at is not None:
                        left = at[w.priority] - 1
                        if left:
                            at[w.priority] = left
                        else:
                            del at[w.priority]
                    by = self.niq_at.get(k)
                    if by is not None:
                        by.pop(w.name, None)
        claims = self.claims[w.quota] if w.idle != "idle_only" else None
        if claims is not None:
            if sign < 0:
                self.upgradable[w.quota].pop(w.name, None)
            elif not e.in_quota:
                self.upgradable[w.quota][w.name] = e
        if sign < 0 and e.in_quota:
            self.inq_freed += 1
        for pool, count in counts.items():
            self.mark_changed(pool)
            dg, dc, dm = sign * g * count, sign * c * count, sign * m * count
            add_row(self.pool_used[pool], dg, dc, dm)
            if claims is not None:
                u = claims.get(pool)
                if u is None:
                    u = claims[pool] = [0, 0, 0]
                add_row(u, dg, dc, dm)
            self._account_chain(self.usage, chain, pool, dg, dc, dm)
            key = (w.quota, pool)
            if e.in_quota:
                self._account_chain(self.inq, chain, pool, dg, dc, dm)
                u = self.direct_inq.get(key)
                if u is None:
                    u = self.direct_inq[key] = [0, 0, 0]
                add_row(u, dg, dc, dm)
            else:
                self.borrowed[key] = self.borrowed.get(key, 0) + dg

    def _account_chain(
        self,
        table: dict[tuple[str, str], list[int]],
        chain: tuple[str, ...],
        pool: str,
        dg: int,
        dc: int,
        dm: int,
    ) -> None:
        """Add usage to the rows of a quota chain in one pool."""
        for a in chain:
            u = table.get((a, pool))
            if u is None:
                u = table[(a, pool)] = [0, 0, 0]
            add_row(u, dg, dc, dm)

    def relabel(self, labels: dict[str, bool]) -> None:
        """Apply a whole classification at once, rebuilding the label tables in one pass.

        labels holds every entry's label (an entry it omits is In Quota unless idle_only).
        """
        self.borrowed.clear()
        self.niq_at.clear()
        self.drop_victim_caches()
        own: dict[tuple[str, str], list[int]] = {}
        # quota by quota, so the per-entry tables are keyed by pool name alone
        for quota, entries in self.by_quota.items():
            upgradable = self.upgradable[quota]
            upgradable.clear()
            if not entries:
                continue
            inq: dict[str, list[int]] = {}
            lent: dict[str, int] = {}
            niq: dict[str, dict[str, Entry]] = {}
            for name, e in entries.items():
                w = e.w
                ok = labels.get(name)
                if ok is None:
                    ok = w.idle != "idle_only"
                e.in_quota = ok
                e.key = None
                g, c, m = e.req
                if not ok:
                    if w.idle != "idle_only":
                        upgradable[name] = e
                    for pool, count in e.pool_counts.items():
                        lent[pool] = lent.get(pool, 0) + g * count
                        if w.kind == "training":
                            by = niq.get(pool)
                            if by is None:
                                niq[pool] = {name: e}
                            else:
                                by[name] = e
                    continue
                for pool, count in e.pool_counts.items():
                    u = inq.get(pool)
                    if u is None:
                        inq[pool] = [g * count, c * count, m * count]
                    else:
                        add_row(u, g * count, c * count, m * count)
            for pool, u in inq.items():
                own[(quota, pool)] = u
            for pool, gpu in lent.items():
                self.borrowed[(quota, pool)] = gpu
            for pool, by in niq.items():
                self.niq_at[(quota, pool)] = by
        # the subtree usage is that of the quota and its descendants
        inq_all: dict[tuple[str, str], list[int]] = {}
        chains = self.tree.chain
        for (quota, pool), t in own.items():
            for a in chains[quota]:
                u = inq_all.get((a, pool))
                if u is None:
                    inq_all[(a, pool)] = list(t)
                else:
                    add_row(u, t[0], t[1], t[2])
        self.direct_inq = own
        self.inq = inq_all
        self.inq_freed += 1
        for pool in self.pools:
            self.mark_changed(pool)

    def mark_changed(self, pool: str) -> None:
        """Note that something in the pool changed now."""
        self.tick += 1
        self.changed[pool] = self.tick

    def flip(self, e: Entry) -> None:
        """Give a running entry the other label, moving its usage between the In-Quota and
        the borrowed tables (the victim caches are left to the caller, see
        drop_victim_caches)."""
        self._account(e, -1)
        e.in_quota = not e.in_quota
        e.key = None
        if e.in_quota:
            e.why = e.why_quota = ""
        self._account(e, 1)

    def drop_victim_caches(self) -> None:
        """Forget the victim orders, bounds and windows: some label changed."""
        self.victim_cache.clear()
        self.bound_cache.clear()
        self.merged_cache.clear()
        self.merged_by_group.clear()
        self.windows.clear()
        self.window_groups.clear()

    # --- simulation: remove and restore -------------------------------------------------

    def remove(self, name: str) -> Entry:
        """Take a running workload out of the state (freeing its devices); see restore()."""
        e = self.entries.pop(name)
        del self.by_quota[e.w.quota][name]
        self._account(e, -1)
        req = e.req
        for p in e.placements:
            self._give(self.nodes[p.node], req, p.devices, name)
        self.touch(e)
        return e

    def restore(self, e: Entry) -> None:
        """Put back an entry taken out by remove()."""
        req = e.req
        for p in e.placements:
            self._take(self.nodes[p.node], req, p.devices, e.w.name)
        self.entries[e.w.name] = e
        self.by_quota[e.w.quota][e.w.name] = e
        self._account(e, 1)
        self.touch(e)

    def add_replica(self, w: Workload, node: str, devices: tuple[int, ...], in_quota: bool) -> None:
        """Place one new replica of w (creating its entry when it was pending)."""
        e = self.entries.get(w.name)
        created = e is None
        if e is None:
            e = Entry(w, [], in_quota)
            self.entries[w.name] = e
            self.by_quota[w.quota][w.name] = e
            if not in_quota:
                e.why = "reclaim"  # admitted borrowed
                if self.inq_freed != self.tried_freed:
                    # room came back since it was tried In Quota: the next upgrade looks
                    self.upgrade_seen = -1
        ns = self.nodes[node]
        self._take(ns, e.req, devices, w.name)
        e.placements.append(Placement(node, devices))
        e.pool_counts[ns.pool] = e.pool_counts.get(ns.pool, 0) + 1
        # the new replica's usage only (a new entry holds just this one)
        self._account(e, 1, {ns.pool: 1})
        if created and w.kind == "training":
            self._join_groups(e, ns.pool)
        self.touch(e)

    def shield(self, name: str, took_in_quota: bool) -> None:
        """Keep a preemptor that evicted someone out of later victim searches, but for
        preemptors that may take its victims too (see preemption.base._eligible)."""
        grew = took_in_quota and name not in self.took_in_quota
        if grew:
            self.took_in_quota.add(name)
        if name not in self.shielded or grew:
            self.shielded.add(name)
            e = self.entries.get(name)
            if e is not None:
                self.touch(e)

    def unshield(self, name: str) -> bool:
        """Drop a preemptor's shield; whether it had evicted a workload running In Quota."""
        self.shielded.discard(name)
        if name in self.took_in_quota:
            self.took_in_quota.remove(name)
            return True
        return False

    def touch(self, e: Entry) -> None:
        """Tell the cached victim windows of e's groups that reach e's place in the
        preference order that e changed (they are repaired when next used)."""
        if not self.window_groups or e.w.kind != "training":
            return
        k = e.key
        for pool in e.pool_counts:
            for niq in (False,) if e.in_quota else (False, True):
                wins = self.window_groups.get((e.w.quota, pool, niq))
                if not wins:
                    continue
                keep = []
                for win in wins:
                    if not win.live:
                        continue
                    if win.last is None or k is None or k <= win.last:
                        win.added.append(e)
                    keep.append(win)
                wins[:] = keep

    def _join_groups(self, e: Entry, pool: str) -> None:
        """A training entry started this cycle becomes a candidate victim of the sorted groups
        and the priority bounds already built (they were built from the running set)."""
        w = e.w
        for niq in (False, True):
            group = self.victim_cache.get((w.quota, pool, niq))
            if group is not None and (not niq or not e.in_quota):
                self.victim_keys((e,))  # every entry of a sorted group has its key
                bisect.insort(group, e, key=_KEY)
                for merged in self.merged_by_group.get((w.quota, pool, niq), ()):
                    bisect.insort(merged, e, key=_KEY)
        # an upper bound: the gang may still grow to all of its replicas in this pool
        g = e.req[0] * w.replicas
        for key in self.bound_cache:
            if key[0] == w.quota and key[1] == pool and key[2] > w.priority:
                self.bound_cache[key] += g

    def victim_key(self, e: Entry) -> tuple[int, bool, float, float, str]:
        """Lowest priority first, Not in Quota first, least work lost, newest."""
        if e.key is None:
            self.victim_keys((e,))
        assert e.key is not None
        return e.key

    def victim_keys(self, entries: Iterable[Entry]) -> None:
        """Set the victim key of every entry that has none yet (whole groups at once).

        Work lost is the GPU-seconds since the last checkpoint (or the start).
        """
        now = self.now
        for e in entries:
            if e.key is None:
                w = e.w
                since = w.last_checkpoint_at if w.last_checkpoint_at is not None else w.started_at
                lost = work_lost(e.req[0] * len(e.placements), since, now)
                started = w.started_at if w.started_at is not None else w.submitted_at
                e.key = (w.priority, e.in_quota, lost, -started, w.name)

    def drop_new_replicas(self, w: Workload, keep: int) -> None:
        """Undo replicas placed this cycle beyond index keep (a gang that did not fit)."""
        e = self.entries.get(w.name)
        if e is None:
            return
        self.touch(e)
        self._account(e, -1)
        while len(e.placements) > keep:
            p = e.placements.pop()
            ns = self.nodes[p.node]
            self._give(ns, e.req, p.devices, w.name)
            e.pool_counts[ns.pool] -= 1
            if not e.pool_counts[ns.pool]:
                del e.pool_counts[ns.pool]
        if e.placements:
            self._account(e, 1)
        else:
            del self.entries[w.name]
            del self.by_quota[w.quota][w.name]

    # --- reads ---------------------------------------------------------------------------

    def scorer(self) -> FragmentationScorer:
        """The fragmentation scorer over the nodes as they are now: this thread's, kept from
        the last cycle and synced to this state (again if another state synced it since)."""
        if self._scorer is None or self._scorer.owner != self._serial:
            self._scorer = shared_scorer(self.nodes.values(), self.target, self._serial)
            self._changed.clear()
        elif self._changed:
            for ns in self._changed.values():
                self._scorer.update(ns)
            self._changed.clear()
        return self._scorer

    def lowest_priority(self, quota: str, pool: str) -> int | None:
        """The lowest priority of the quota's running training in the pool (None: none runs).
        The entries per priority are counted on the first call and kept as entries join and
        leave, so a call costs the few priorities in use, not a scan."""
        k = (quota, pool)
        at = self.priorities.get(k)
        if at is None:
            at = self.priorities[k] = {}
            by = self.train_at.get(k)
            if by:
                for e in by.values():
                    at[e.w.priority] = at.get(e.w.priority, 0) + 1
        return min(at) if at else None

    def victims_at(self, quota: str, pool: str, niq_only: bool) -> list[Entry]:
        """Running training of one quota in one pool (only Not in Quota with niq_only)."""
        table = self.niq_at if niq_only else self.train_at
        by = table.get((quota, pool))
        return list(by.values()) if by else []

    def used(self, table: dict[tuple[str, str], list[int]], quota: str, pool: str) -> list[int]:
        """A usage row, zero when absent."""
        return table.get((quota, pool)) or [0, 0, 0]

    def work_lost(self, e: Entry) -> float:
        """GPU-seconds since the last checkpoint (or the start) of a running workload."""
        return self.victim_key(e)[2]
