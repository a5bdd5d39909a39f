"""One scheduling cycle: pending → snapshot → classify → admit → place → preempt → result."""

from __future__ import annotations

import gc
import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from .admission import (
    Gap,
    Shares,
    demand,
    describe_max_block,
    describe_pool_block,
    describe_quota_block,
    entitlement_gap,
    fair_shares,
    idle_gpu,
    max_gap,
    may_borrow,
    pool_order,
    scope_key,
    waiting_demand,
)
from .classify import label_running, settle
from .placement import (
    Choice,
    explain_gang_short,
    explain_no_fit,
    find_node,
    place_replicas,
    place_up_to,
)
from .preemption import KINDS, Attempt, PreemptionKind, search
from .queueing import queue_order, rank_order
from .snapshot import Entry, State
from .tree import count, fmt_gpu, gpus, quota_label, short_name
from .types import (
    Admission,
    CycleResult,
    Demotion,
    Pending,
    Placement,
    Preemption,
    Snapshot,
    Workload,
)

# Admission rounds per cycle, a bound on the retries below (later rounds only retry victims,
# displaced admissions and, after a label changed, what still waits). A round's relabels can
# set off another in a deep tree: one in 300,000 random trees of four to seven quotas needed
# five rounds, and with four left a victim to take its place back in the next cycle.
MAX_ROUNDS: Final = 8
# The stages of an admission attempt. IN_QUOTA: In Quota, reclaiming borrowed capacity if
# need be, and for a workload that may not borrow, evicting by child-level or priority
# preemption too. BORROW: idle capacity, with fair-share reclaim among borrowers. EVICT: In
# Quota by child-level or priority preemption, for a borrower that found no idle capacity: a
# workload that may run on idle capacity takes it rather than evict an In-Quota incumbent.
IN_QUOTA: Final = 0
BORROW: Final = 1
EVICT: Final = 2


class Outcome:
    """What one admission attempt achieved."""

    # a plain class, not a dataclass: compiled, a dataclass is built through Python code
    __slots__ = ("placed", "in_quota", "reason", "fair_blocked")

    def __init__(
        self,
        placed: list[Choice] | None = None,
        in_quota: bool = True,
        reason: str = "",
        fair_blocked: bool = False,
    ) -> None:
        self.placed = placed
        self.in_quota = in_quota
        self.reason = reason
        self.fair_blocked = fair_blocked


class Cycle:
    """The working memory of one run_cycle call."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.preempted: list[Preemption] = []
        self.shares: dict[tuple[str, str], tuple[Shares, dict[str, float]]] = {}
        self.pending_borrow: dict[tuple[str, str], dict[str, int]] = {}
        # preemption searches that failed, per signature: later admissions only take
        # capacity, so a request at least as large fails too until some victim is evicted
        self.failures: dict[tuple[object, ...], list[tuple[int, int, int]]] = {}
        self.epoch = 0
        self.enforce_shares = True
        # new placements per workload, and the outcome of every workload still waiting
        self.new: dict[str, list[Placement]] = {}
        self.waiting: dict[str, Outcome] = {}
        # victims of this round (they wait again, and are retried), and admissions of this
        # cycle withdrawn because a workload ranking ahead of them needed their place
        self.evicted: list[Workload] = []
        self.displaced: list[Workload] = []
        # the failed attempts of waiting workloads per (name, stage, fair shares enforced):
        # the round they ran in, the state's tick since which they would end the same way,
        # the replicas asked for and the outcome
        self.tried: dict[tuple[str, int, bool], tuple[int, int, int, Outcome]] = {}
        self.round = 0
        self.pass_start = 0  # the state's tick when this round's fair shares were fixed
        # per pool, the round since which borrowers wait there for what they wait for now
        self.demand_from: dict[str, int] = {}
        # whether this round lent idle capacity beyond a quota's fair share (see _run_cycle)
        self.beyond_share = False
        # who lost the In-Quota label and why, and whether a label changed in this round
        self.demoted: list[Demotion] = []
        self.relabelled = False

    def open_borrowing(self, borrowers: list[Workload]) -> None:
        """Fix the fair shares of a borrowing pass as it starts, in every (scope, pool) where
        a borrower waits, so they do not depend on which borrower asks first. Searches that
        failed under the last pass's shares may succeed under these; where the demand
        waiting to borrow changed since, the shares may have too."""
        state = self.state
        demand = waiting_demand(state, borrowers)
        last = self.pending_borrow
        for key in last.keys() | demand.keys():
            if last.get(key) != demand.get(key):
                self.demand_from[key[1]] = self.round
        self.pending_borrow = demand
        self.pass_start = state.tick
        self.shares = {
            key: fair_shares(state, key[1], key[0], extra) for key, extra in demand.items()
        }
        self.epoch += 1

    def shares_for(self, quota: str, pool: str) -> tuple[Shares, dict[str, float]]:
        """Fair shares of the quota's scope in a pool, as this borrowing pass fixed them (every
        borrower's quota and pools have them: see open_borrowing)."""
        return self.shares[(scope_key(self.state, quota), pool)]

    def attempt(self, w: Workload, count: int, stage: int) -> Outcome:
        """Try to start count replicas of w, or give the outcome of the same attempt in an
        earlier round when nothing in w's pools changed since: it would end the same way, as
        an attempt reads only its pools (their nodes, usage and labels, and borrowing their
        fair shares, fixed as the pass started) and a failed one leaves them as they were."""
        state = self.state
        changed = state.changed
        key = (w.name, stage, self.enforce_shares)
        last = self.tried.get(key)
        if (
            last is not None
            and last[2] == count
            and all(changed.get(p, 0) <= last[1] for p in w.pools)
            and (stage != BORROW or all(self.demand_from.get(p, 0) <= last[0] for p in w.pools))
        ):
            return last[3]
        before = [changed.get(p, 0) for p in w.pools]
        out = self._try(w, count, stage)
        if out.placed is None:
            # a failed attempt's trial placements and searches were undone
            for p, t in zip(w.pools, before, strict=True):
                changed[p] = t
            since = self.pass_start if stage == BORROW else state.tick
            self.tried[key] = (self.round, since, count, out)
        return out

    def _try(self, w: Workload, count: int, stage: int) -> Outcome:
        """Try to start count replicas of w: In Quota (IN_QUOTA, EVICT) or borrowed (BORROW).

        Every In-Quota attempt of a round runs before any borrowing, so a borrower never
        takes idle capacity that a workload entitled to it wanted in the same cycle (it would
        be reclaimed from the borrower in the next one). A failed attempt's reason is the
        state's as it is now, when the workload is tried.
        """
        borrow = stage == BORROW
        state = self.state
        pools = pool_order(state, w)
        if not pools:
            return Outcome(reason=describe_pool_block(state, w))
        reasons: list[str] = []
        fair_blocked = False
        # per pool, whether w fits In Quota; a failed placement leaves the state as it was,
        # so reclaim below need not ask again
        entitled: dict[str, bool] = {}
        # the pools the quotas let w into, and where in `reasons` a failed placement's goes
        open_pools: list[str] = []
        at = -1
        if not borrow:
            # In Quota: entitlement along the chain, max, then a node for every replica.
            for pool in pools:
                gap = entitlement_gap(state, w, pool, count)
                entitled[pool] = gap is None
                if gap is not None:
                    reasons.append(self._quota_reason(w, pool, count, gap))
                    continue
                if max_gap(state, w, pool, count) is not None:
                    reasons.append(self._quota_reason(w, pool, count, None))
                    continue
                open_pools.append(pool)
                at = len(reasons) if at < 0 else at
        else:
            # Borrowing: only idle capacity, within max and (first pass) the fair share.
            need = demand(w, count)[0]
            for pool in pools:
                if idle_gpu(state, w.quota, pool) < need or max_gap(state, w, pool, count):
                    gap = entitlement_gap(state, w, pool, count)
                    reasons.append(self._quota_reason(w, pool, count, gap))
                    continue
                if self.enforce_shares and need:
                    shares, _ = self.shares_for(w.quota, pool)
                    mine = state.borrowed.get((w.quota, pool), 0)
                    if mine + need > shares.get(w.quota, 0.0) + 1e-6:
                        fair_blocked = True
                        reasons.insert(
                            0,
                            f"{quota_label(w.quota)} has borrowed its fair share of idle "
                            f"GPUs in pool {pool}",
                        )
                        at = at + 1 if at >= 0 else at
                        continue
                open_pools.append(pool)
                at = len(reasons) if at < 0 else at
        if open_pools:
            placed, short = _place(state, w, count, not borrow, open_pools)
            if placed is not None:
                return Outcome(placed, not borrow)
            why = explain_no_fit(state, w) if short is None else explain_gang_short(w, *short)
            reasons.insert(at, why)
        # Preemption, in DESIGN's order; each kind restores the state when it cannot help.
        # In Quota, only reclaim, child-level and priority preemption (the preemptor ends up
        # In Quota); borrowing, only fair-share reclaim, which is between borrowers.
        if (
            stage == IN_QUOTA
            and may_borrow(w)
            and _may_evict(state, w, pools)
            and not self._could_borrow(w, count, pools)
        ):
            # No idle capacity for it to take instead: it evicts now, in rank order, before
            # a workload ranking behind it takes the place it would evict for.
            stage = EVICT
        kinds = _kinds(w, stage)
        sig = (self.epoch, stage, w.quota, w.kind, w.idle, count, w.pools, w.priority)
        req = (w.request.gpu, w.request.cpu, w.request.memory)
        failed = self.failures.setdefault(sig, [])
        if any(f[0] <= req[0] and f[1] <= req[1] and f[2] <= req[2] for f in failed):
            return Outcome(reason=_first(reasons), fair_blocked=fair_blocked)
        for kind in kinds:
            for pool in pools:
                a = Attempt(state, w, pool, count)
                a.entitled = entitled.get(pool)
                if kind.reason == "fair_share":
                    a.shares, a.weights = self.shares_for(w.quota, pool)
                found = search(kind, a)
                if found is None:
                    continue
                placed, victims, label = found
                if victims:
                    self.epoch += 1
                for v in victims:
                    if v.w.name in state.fresh:
                        self._displace(v.w, w)
                        continue
                    # A preemptor that evicted someone keeps its place for the rest of the
                    # cycle: its victims must never have been evicted for nothing.
                    state.shield(w.name, v.in_quota)
                    self.evicted.append(v.w)
                    reason, about = victim_reason(kind, v, w)
                    self.preempted.append(
                        Preemption(v.w.name, w.name, reason, state.work_lost(v), about)
                    )
                return Outcome(placed, label)
        failed.append(req)
        return Outcome(reason=_first(reasons), fair_blocked=fair_blocked)

    def _could_borrow(self, w: Workload, count: int, pools: Sequence[str]) -> bool:
        """Whether w could start borrowed now (idle capacity, max and a node for every
        replica; fair shares aside): for one replica a look at the nodes, for a gang a
        trial placement, undone."""
        state = self.state
        need = demand(w, count)[0]
        req = (w.request.gpu, w.request.cpu, w.request.memory)
        e = state.entries.get(w.name)
        keep = len(e.placements) if e is not None else 0
        for pool in pools:
            if idle_gpu(state, w.quota, pool) < need or max_gap(state, w, pool, count):
                continue
            if count == 1:
                if find_node(state, req, [pool], False, w.name) is not None:
                    return True
            elif place_replicas(state, w, count, False, [pool]) is not None:
                state.drop_new_replicas(w, keep)
                return True
        return False

    def _displace(self, v: Workload, by: Workload) -> None:
        """Withdraw the admission of v, started this cycle, whose place `by` takes.

        The next cycle would evict v for `by` by the very same rules; doing it now costs no
        work and no eviction, and v is retried in the next round of this cycle.
        """
        state = self.state
        state.fresh.discard(v.name)
        self.new.pop(v.name, None)
        self.displaced.append(v)
        self.waiting[v.name] = Outcome(
            reason=f"job {short_name(by.name)} took its place in this cycle"
        )
        if v.name in state.shielded:
            # v evicted someone and `by` takes its place now, starting In Quota: v's victims
            # are by's, taken for the same place by a kind open to by. Either v runs In Quota
            # and by outranks it (of its quota and higher priority, or of an ancestor with
            # child-level preemption): lower priority in v's quota, borrowed capacity within
            # v's entitlement, or v's descendants'. Or v runs Not in Quota, and so did all its
            # victims: by reclaims them, as it reclaims v (see preemption.base._eligible).
            self._hand_over(v.name, by)

    def _hand_over(self, name: str, by: Workload) -> None:
        """The victims of a preemptor whose place `by`, In Quota, took become by's, and by
        keeps its place for the rest of the cycle."""
        state = self.state
        took_in_quota = state.unshield(name)
        self.preempted = [replace(p, by=by.name) if p.by == name else p for p in self.preempted]
        state.shield(by.name, took_in_quota)

    def settle(self) -> None:
        """Settle the labels after admissions (see classify.settle), and withdraw the
        admissions that may not run Not in Quota since."""
        state = self.state
        more, relabelled = settle(state)
        self.demoted.extend(more)
        if relabelled:
            self.relabelled = True
            self.epoch += 1  # new labels: searches that failed may succeed now
            if self.withdraw_out_of_quota(more):
                self.demoted.extend(settle(state)[0])

    def withdraw_out_of_quota(self, demoted: Sequence[Demotion]) -> bool:
        """Withdraw this cycle's admissions labelled Not in Quota since (a workload ranking
        ahead took the room) that may not run so; they wait and are retried.

        Such a job (idle none, a service, a notebook) must never start borrowed. One that
        evicted someone keeps its place, unless a parent's own admission of this cycle took
        its room (child-level preemption, `demoted`): that one takes its victims, as when it
        takes its place (see _displace), and it waits. Its victims must never have been
        evicted for a workload that runs Not in Quota.
        """
        state = self.state
        taken = {d.workload: d.by for d in demoted}
        out = False
        for name in list(self.new):
            e = state.entries.get(name)
            if e is None or e.in_quota:
                continue
            if name in state.shielded:
                by = taken.get(name, "")
                holder = state.entries.get(by)
                if holder is None or not holder.in_quota:
                    continue  # no job In Quota took its room (the walk names one it admitted)
                self._hand_over(name, holder.w)
            elif may_borrow(e.w):
                continue
            state.drop_new_replicas(e.w, len(e.placements) - len(self.new.pop(name)))
            state.fresh.discard(name)
            self.displaced.append(e.w)
            self.waiting[name] = Outcome(
                reason=f"{quota_label(e.w.quota)} has no room left In Quota for it after "
                "workloads ranking ahead of it started in this cycle"
            )
            out = True
        return out

    def _quota_reason(self, w: Workload, pool: str, count: int, gap: Gap | None) -> str:
        """A sentence for a workload the quotas keep out of a pool, from the state as it is
        now: the min that keeps it from running In Quota (gap), and what keeps it from
        borrowing (a max, named with its numbers, or the idle capacity left)."""
        state = self.state
        capped = describe_max_block(state, w, pool, count)
        blocked = None if capped is None else capped[0]
        if capped is not None and (gap is None or capped[1]):
            return capped[0]
        if gap is None:
            return explain_no_fit(state, w)
        head = describe_quota_block(state, w, pool, count, gap)
        if w.kind == "inference":
            return f"{head}, and inference services never borrow idle capacity"
        if w.kind == "interactive":
            return f"{head}, and interactive instances never borrow idle capacity"
        if w.idle == "none":
            return f"{head}, and idle borrowing is off for this job"
        if blocked is not None:
            return f"{head}, and {blocked}"
        idle = idle_gpu(state, w.quota, pool)
        need = demand(w, count)[0]
        return (
            f"{head}, and only {fmt_gpu(idle)} idle {'GPU' if idle == 1000 else 'GPUs'} can be "
            f"borrowed there (it needs {gpus(need)})"
        )


def _place(
    state: State, w: Workload, count: int, in_quota: bool, pools: list[str]
) -> tuple[list[Choice] | None, tuple[int, int, str] | None]:
    """Place count replicas in the open pools. One replica goes to the best node of any of
    them (the pools a workload accepts are a set: its placement scores nodes across them, as
    FGD does across GPU models); a gang, whose quota checks hold per pool, to the first pool
    that takes all of it. When none does: (replicas that fit, count, pool) of the pool that
    took the most of the gang, None when no replica fitted anywhere."""
    if count == 1:
        return place_replicas(state, w, 1, in_quota, pools), None
    short: tuple[int, int, str] | None = None
    for pool in pools:
        keep, placed = place_up_to(state, w, count, in_quota, [pool])
        if len(placed) == count:
            return placed, None
        state.drop_new_replicas(w, keep)
        if placed and (short is None or len(placed) > short[0]):
            short = (len(placed), count, pool)
    return None, short


def _first(reasons: list[str]) -> str:
    """The most telling reason: the first one recorded."""
    return reasons[0] if reasons else "it cannot be placed"


def _kinds(w: Workload, stage: int) -> list[PreemptionKind]:
    """The kinds of preemption an attempt at this stage may use."""
    if stage == BORROW:
        return [k for k in KINDS if k.reason == "fair_share"]
    if stage == IN_QUOTA and may_borrow(w):
        return [k for k in KINDS if k.reason == "reclaim"]
    return [k for k in KINDS if k.reason != "fair_share"]


def _may_evict(state: State, w: Workload, pools: Sequence[str]) -> bool:
    """Whether child-level or priority preemption could help w at all (their cheap tests)."""
    for kind in KINDS:
        if kind.reason in ("child_preemption", "priority"):
            for pool in pools:
                if kind.applies(Attempt(state, w, pool, 1)):
                    return True
    return False


def victim_reason(kind: PreemptionKind, v: Entry, by: Workload) -> tuple[str, str]:
    """The reason a victim's message gives, and the quota it names: the kind that really
    took it. A Not-in-Quota victim of reclaim (or fair-share reclaim) that lost its In-Quota
    label to a smaller min or to child-level preemption was taken by that; only one that
    borrowed ran on capacity borrowed from the reclaiming quota."""
    if not v.in_quota and kind.reason in ("reclaim", "fair_share"):
        if v.why in ("min", "child_preemption"):
            return v.why, v.why_quota
        return kind.reason, by.quota if kind.reason == "reclaim" else ""
    return kind.reason, by.quota


def run_cycle(snapshot: Snapshot, rounds: int = MAX_ROUNDS) -> CycleResult:
    """Decide one cycle, in at most `rounds` admission rounds: deterministic for a given
    snapshot."""
    if rounds < 1:
        raise ValueError(f"rounds must be 1 or more, got {rounds}")
    # The cycle allocates hundreds of thousands of small, acyclic objects next to a snapshot
    # of millions; the cyclic collector would traverse all of them again and again (10-20%
    # of a large cycle) and can free none of them until the cycle ends.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _run_cycle(snapshot, rounds)
    finally:
        if paused:
            gc.enable()


def _run_cycle(snapshot: Snapshot, rounds: int) -> CycleResult:
    # 1. Pending: every waiting workload, in queue order.
    # 2. Snapshot: the mutable working state (validates the input).
    state = State(snapshot)
    queue = queue_order(state.tree, snapshot.workloads)
    # 3. Classify the running set: the labels it comes with, by the central rule.
    cycle = Cycle(state)
    cycle.demoted = label_running(state)
    # 4-6. Admit, place and preempt, one workload at a time in queue order, in rounds: a
    # round's victims and displaced admissions are retried in the next one, and so is every
    # workload still waiting once a label changed after the round's admissions (a parent's
    # own admission turned its children's Not in Quota, where reclaim may take them, or room
    # came back) or once the round lent idle capacity beyond a quota's fair share (counted as
    # borrowed, it moves the shares, and a borrower below its share may take it back now, a
    # displacement, rather than evict it in the next cycle), so what is left waiting at the
    # end would wait in the next cycle too.
    todo = queue
    victims: dict[str, Workload] = {}  # victims as pending again: they restart from scratch
    unsettled = True  # until a round leaves nothing to retry
    for rnd in range(rounds):
        cycle.round = rnd
        cycle.evicted.clear()
        cycle.displaced.clear()
        cycle.relabelled = False
        _round(cycle, todo)
        if (
            not cycle.evicted
            and not cycle.displaced
            and not (cycle.relabelled and cycle.waiting)
            and not cycle.beyond_share
        ):
            unsettled = False
            break
        for v in cycle.evicted:
            victims[v.name] = replace(
                v, running=(), started_at=None, last_checkpoint_at=None, in_quota=None
            )
        again = [w for w in queue if w.name in cycle.waiting]
        again.extend(v for v in victims.values() if v.name not in state.entries)
        todo = queue_order(state.tree, again)
    new = cycle.new
    waiting = cycle.waiting
    # 7. Result: the final running set's labels, who lost the In-Quota label and why, and
    # why every workload left is waiting.
    entries = state.entries
    classification = {name: e.in_quota for name, e in entries.items()}
    lost: dict[str, Demotion] = {}
    for d in cycle.demoted:
        e = entries.get(d.workload)
        if e is not None and not e.in_quota:
            lost[d.workload] = d
    admitted = tuple(
        Admission(name, classification.get(name, False), tuple(pl))
        for name, pl in new.items()
        if pl
    )
    pending: list[Pending] = []
    # the queue, then victims still waiting (they wait again, for the reason of their last try)
    for w in itertools.chain(queue, victims.values()):
        out = waiting.get(w.name)
        if out is None:
            continue
        e = state.entries.get(w.name)
        have = len(e.placements) if e is not None else 0
        if w.kind == "inference" and have:
            left = w.replicas - have
            verb = "is" if left == 1 else "are"
            reason = f"{left} of {count(w.replicas, 'replica')} {verb} waiting: {out.reason}"
        else:
            reason = out.reason
        pending.append(Pending(w.name, reason))
    stats = {
        "running": len(state.entries),
        "admitted": len(admitted),
        "preempted": len(cycle.preempted),
        "pending": len(pending),
    }
    return CycleResult(
        admitted,
        tuple(_as_settled(p, entries) for p in cycle.preempted),
        classification,
        tuple(pending),
        stats,
        tuple(lost.values()),
        unsettled,
    )


def _as_settled(p: Preemption, entries: dict[str, Entry]) -> Preemption:
    """A preemption as the cycle ends: a borrower's victim of fair-share reclaim was
    reclaimed by its preemptor's quota if that one ends In Quota (it took the place of the
    borrower that evicted it, or room came back in its quota in the same cycle)."""
    if p.reason != "fair_share":
        return p
    e = entries[p.by]
    return replace(p, reason="reclaim", quota=e.w.quota) if e.in_quota else p


def _round(cycle: Cycle, todo: list[Workload]) -> None:
    """One pass of admissions: everything In Quota first, then, if that changed no label,
    borrowers on idle capacity; the labels settled after each."""
    waiting = cycle.waiting
    state = cycle.state
    state.tried_freed = state.inq_freed
    ranked = rank_order(state.tree, todo, state.now)
    for w in ranked:
        out = _admit(cycle, w, IN_QUOTA)
        if out is None:
            waiting.pop(w.name, None)
        else:
            waiting[w.name] = out
    # Borrowers are weighed by settled labels: what the In-Quota admissions push Not in
    # Quota borrows, and what they make room for does not (a fair share reckoned on the
    # labels before could be taken back by its victim in the next cycle). If they changed a
    # label, borrowing waits for the next round, whose In-Quota attempts come first on the
    # new labels (room they freed In Quota is not lent).
    cycle.settle()
    if cycle.relabelled:
        cycle.beyond_share = False
        return
    borrowers = [w for w in todo if w.name in waiting and may_borrow(w)]
    # Fair shares weigh what borrows now against what still waits to borrow, as the next
    # cycle's fair-share reclaim will: borrowing admissions leave them unchanged (idle
    # becomes borrowed), so what a borrower gets within its share it keeps. This round's
    # victims wait to borrow too (they are retried in the next round, so none is among the
    # borrowers), and their demand counts already: a borrower must not reclaim by a share
    # that they will shrink.
    cycle.open_borrowing(borrowers + cycle.evicted)
    cycle.enforce_shares = True
    blocked = _borrow(cycle, borrowers)
    # Fair shares only order the borrowers; idle left over goes to whoever still fits.
    cycle.enforce_shares = False
    over: set[str] = set()  # pools where a quota now borrows beyond its share
    for w in blocked:
        if w.name not in waiting:
            continue
        out = _admit(cycle, w, BORROW)
        if out is None:
            waiting.pop(w.name, None)
            over.update(state.nodes[p.node].pool for p in cycle.new[w.name])
        else:
            waiting[w.name] = _merge(waiting[w.name], out)
    cycle.enforce_shares = True
    cycle.beyond_share = bool(over)
    if over:
        # A quota now borrows beyond its fair share, so its borrowers are fair-share victims
        # of a borrower below its share that found no room: that one gets its turn now, as
        # it would in the next cycle (new victims, so failed searches may succeed now).
        cycle.epoch += 1
        skip = {w.name for w in blocked}
        _borrow(
            cycle,
            [
                w
                for w in borrowers
                if w.name in waiting and w.name not in skip and any(p in over for p in w.pools)
            ],
        )
    # Borrowers that found no idle capacity may still start In Quota by evicting someone of
    # lower rank (child-level or priority preemption). A failed search changes nothing, so
    # the reason stays the one their borrowing attempt gave.
    for w in ranked:
        if (
            w.name in waiting
            and may_borrow(w)
            and w.idle != "idle_only"
            and _admit(cycle, w, EVICT) is None
        ):
            waiting.pop(w.name, None)
    cycle.settle()


def _borrow(cycle: Cycle, borrowers: list[Workload]) -> list[Workload]:
    """Admit what fits of each waiting borrower within its fair share; the ones it blocked."""
    waiting = cycle.waiting
    blocked: list[Workload] = []
    for w in borrowers:
        first = waiting.get(w.name)
        if first is None:
            continue
        out = _admit(cycle, w, BORROW)
        if out is None:
            waiting.pop(w.name, None)
            continue
        if out.fair_blocked:
            blocked.append(w)
        waiting[w.name] = _merge(first, out)
    return blocked


def _merge(first: Outcome, second: Outcome) -> Outcome:
    """The outcome of a workload's last attempt, unless it gave no reason: its sentence
    names the state as it was when the workload was last tried."""
    return second if second.reason else first


def _admit(cycle: Cycle, w: Workload, stage: int) -> Outcome | None:
    """Admit what fits of w; None when it is fully running, else the failed outcome."""
    state = cycle.state
    e = state.entries.get(w.name)
    have = len(e.placements) if e is not None else 0
    missing = w.replicas - have
    if missing <= 0:
        return None
    if w.is_gang:
        out = cycle.attempt(w, missing, stage)
        if out.placed is None:
            return out
        _record(state, w, out, cycle.new)
        return None
    for _ in range(missing):
        out = cycle.attempt(w, 1, stage)
        if out.placed is None:
            return out
        _record(state, w, out, cycle.new)
    return None


def _record(state: State, w: Workload, out: Outcome, new: dict[str, list[Placement]]) -> None:
    """Remember the new placements of w for the result (the last ones of its entry).

    A workload running Not in Quota (a service) that starts a replica In Quota turns In
    Quota as a whole: its entitlement counted the replicas it runs (admission.outside).
    """
    assert out.placed is not None
    e = state.entries[w.name]
    if out.in_quota and not e.in_quota:
        state.flip(e)
        state.drop_victim_caches()
    state.fresh.add(w.name)
    new.setdefault(w.name, []).extend(e.placements[-len(out.placed) :])
