"""Loading a snapshot's running set into the working state, and checking its workloads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .snapshot import LEVEL, Entry, NodeState
from .tree import Vec, add_row
from .types import MILLI, Placement, ScenarioError, Workload

if TYPE_CHECKING:
    from .snapshot import State


def pick_devices(ns: NodeState, gpu: int) -> tuple[int, ...] | None:
    """Deterministic device choice: first whole free devices, or best-fit partial one."""
    if gpu == 0:
        return ()
    if gpu < MILLI:
        best = -1
        for i, d in enumerate(ns.dev):
            if d >= gpu and (best < 0 or d < ns.dev[best]):
                best = i
        return None if best < 0 else (best,)
    need = gpu // MILLI
    picked = tuple(i for i, d in enumerate(ns.dev) if d == MILLI)[:need]
    return picked if len(picked) == need else None


def fits_on(ns: NodeState, req: Vec, devices: tuple[int, ...]) -> bool:
    """The replica's CPU, memory and per-device GPU share fit on this node."""
    if req[1] > ns.cpu or req[2] > ns.mem:
        return False
    share = req[0] if req[0] < MILLI else MILLI
    dev = ns.dev
    n = len(dev)
    for i in devices:
        if i < 0 or i >= n or dev[i] < share:
            return False
    return len(devices) < 2 or len(set(devices)) == len(devices)


class Loader:
    """Loads the running set in bulk, with the result the one-by-one path would give.

    Node buckets are not kept live while loading: each node remembers when it last entered
    its whole-device bucket and each partial-level bucket (what PoolIndex.move would have
    done), and the buckets are built once at the end in that order. Usage is summed per
    (quota, pool) and pushed up the quota chains once.
    """

    __slots__ = ("state", "indexed", "seq", "seq_full", "seq_lv", "direct")

    def __init__(self, state: State, indexed: list[NodeState]) -> None:
        self.state = state
        self.indexed = indexed
        # indexed nodes start in their buckets in name order, before any allocation
        self.seq = 0
        self.seq_full = {ns.name: i - len(indexed) for i, ns in enumerate(indexed)}
        self.seq_lv: dict[str, dict[int, int]] = {ns.name: {} for ns in indexed}
        self.direct: dict[tuple[str, str], list[int]] = {}

    def load(self, w: Workload) -> None:
        """Allocate a running workload's placements, refusing over-allocation."""
        state = self.state
        nodes = state.nodes
        e = Entry(w, [], False)
        req = e.req
        g = req[0]
        share = g if g < MILLI else MILLI
        placements = e.placements
        counts = e.pool_counts
        name = w.name
        for p in w.running:
            ns = nodes.get(p.node)
            if ns is None:
                raise ScenarioError(f"workload {name!r} runs on unknown node {p.node!r}")
            devices: tuple[int, ...] | None = p.devices
            if devices:
                placements.append(p)
            else:
                devices = pick_devices(ns, g)
                if devices == p.devices:  # no GPU: the placement as given (no new object)
                    placements.append(p)
                elif devices is not None:
                    placements.append(Placement(p.node, devices))
            if devices is None or not fits_on(ns, req, devices):
                raise ScenarioError(
                    f"node {p.node!r} is over-allocated by the running set (at {name!r})"
                )
            if share == MILLI:  # the common case of whole devices, inline
                self.seq += 1
                dev = ns.dev
                for i in devices:
                    dev[i] = 0
                ns.full -= len(devices)
                self.seq_full[ns.name] = self.seq
                ns.cpu -= req[1]
                ns.mem -= req[2]
                ns.residents[name] = ns.residents.get(name, 0) + 1
            else:
                self._take(ns, share, req, devices, name)
            counts[ns.pool] = counts.get(ns.pool, 0) + 1
        state.entries[name] = e
        state.by_quota[w.quota][name] = e
        claims = state.claims[w.quota] if w.idle != "idle_only" else None
        direct = self.direct
        for pool, count in counts.items():
            if claims is not None:
                u = claims.get(pool)
                if u is None:
                    claims[pool] = [g * count, req[1] * count, req[2] * count]
                else:
                    add_row(u, g * count, req[1] * count, req[2] * count)
            k = (w.quota, pool)
            if w.kind == "training":
                by = state.train_at.get(k)
                if by is None:
                    by = state.train_at[k] = {}
                    state.niq_at[k] = {}
                by[name] = e
                state.niq_at[k][name] = e
            u = direct.get(k)
            if u is None:
                direct[k] = [g * count, req[1] * count, req[2] * count]
            else:
                add_row(u, g * count, req[1] * count, req[2] * count)

    def _take(
        self, ns: NodeState, share: int, req: Vec, devices: tuple[int, ...], owner: str
    ) -> None:
        """NodeState's take and refresh, recording bucket moves instead of making them."""
        ns.cpu -= req[1]
        ns.mem -= req[2]
        ns.residents[owner] = ns.residents.get(owner, 0) + 1
        if not share:
            return
        self.seq += 1
        dev = ns.dev
        seen = self.seq_lv.get(ns.name)
        if len(devices) == 1 and seen is not None:
            # one shared device: only its old and its new level bucket can change
            i = devices[0]
            before = dev[i]
            after = dev[i] = before - share
            if before == MILLI:
                ns.full -= 1
                self.seq_full[ns.name] = self.seq
            lo = before // LEVEL if LEVEL <= before < MILLI else -1
            ln = after // LEVEL if after >= LEVEL else -1
            if lo != ln:
                if ln >= 0 and ln not in seen:
                    seen[ln] = self.seq
                if lo >= 0:
                    # the old bucket stays while another device is still in it
                    low, high = lo * LEVEL, lo * LEVEL + LEVEL
                    for d in dev:
                        if low <= d < high:
                            break
                    else:
                        del seen[lo]
            return
        for i in devices:
            dev[i] -= share
        full = 0
        levels: set[int] = set()
        for d in dev:
            if d == MILLI:
                full += 1
            elif d >= LEVEL:
                levels.add(d // LEVEL)
        if full != ns.full:
            ns.full = full
            self.seq_full[ns.name] = self.seq
        if seen is None:  # not schedulable: never indexed
            ns.levels = frozenset(levels)
            return
        for lv in levels - seen.keys():
            seen[lv] = self.seq
        for lv in [lv for lv in seen if lv not in levels]:
            del seen[lv]

    def finish(self) -> None:
        """Fill the pools' buckets in the recorded order and push usage up the chains."""
        state = self.state
        seq_full = self.seq_full
        for ns in sorted(self.indexed, key=lambda n: seq_full[n.name]):
            index = state.pools[ns.pool]
            index.nodes[ns.name] = ns
            index.by_full[ns.full][ns.name] = ns
            ns.levels = frozenset(self.seq_lv[ns.name])
        by_level: list[tuple[int, int, NodeState]] = [
            (t, lv, ns) for ns in self.indexed for lv, t in self.seq_lv[ns.name].items()
        ]
        by_level.sort(key=lambda x: x[0])
        for _, lv, ns in by_level:
            state.pools[ns.pool].by_level[lv][ns.name] = ns
        chains = state.tree.chain
        for (quota, pool), (dg, dc, dm) in self.direct.items():
            pu = state.pool_used[pool]
            add_row(pu, dg, dc, dm)
            state.borrowed[(quota, pool)] = state.borrowed.get((quota, pool), 0) + dg
            for a in chains[quota]:
                u = state.usage.get((a, pool))
                if u is None:
                    state.usage[(a, pool)] = [dg, dc, dm]
                else:
                    add_row(u, dg, dc, dm)


def check_workload(w: Workload) -> None:
    """Refuse requests the core cannot represent."""
    if w.kind not in ("training", "inference", "interactive"):
        raise ScenarioError(f"workload {w.name!r}: kind must be training, inference or interactive")
    if w.idle not in ("none", "acceptable", "idle_only"):
        raise ScenarioError(f"workload {w.name!r}: idle must be none, acceptable or idle_only")
    if w.replicas < 1:
        raise ScenarioError(f"workload {w.name!r}: replicas must be at least 1")
    r = w.request
    if r.gpu < 0 or r.cpu < 0 or r.memory < 0:
        raise ScenarioError(f"workload {w.name!r}: requests must not be negative")
    if r.gpu > MILLI and r.gpu % MILLI:
        raise ScenarioError(
            f"workload {w.name!r}: gpu must be a fraction of one GPU or a whole number of GPUs"
        )
    if not w.pools:
        raise ScenarioError(f"workload {w.name!r}: pools must list at least one node pool")
    if len(w.running) > w.replicas:
        raise ScenarioError(f"workload {w.name!r} runs more replicas than it asks for")
