"""The label tables the cycle keeps up to date entry by entry match a rebuild from the labels,
and the labels a cycle ends with are the ones the rule gives its running set."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.scheduling.classify import classify, label_running, settle
from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.snapshot import State
from jobs.scheduling.types import Snapshot

from .test_properties import clusters, running_sets
from .test_stability import next_snapshot

RELABEL = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tables(state: State) -> tuple[dict[object, object], ...]:
    """The state's In-Quota and borrowed tables, without their zero rows, and the lowest
    priority of the running training per quota and pool."""
    return (
        {k: u for k, u in state.inq.items() if any(u)},
        {k: u for k, u in state.direct_inq.items() if any(u)},
        {k: g for k, g in state.borrowed.items() if g},
        {k: set(by) for k, by in state.niq_at.items() if by},
        {q: set(by) for q, by in state.upgradable.items() if by},
        {k: state.lowest_priority(*k) for k, by in state.train_at.items() if by},
    )


def running_now(state: State, snap: Snapshot) -> Snapshot:
    """The snapshot of the state's running set with its labels, as the next cycle loads it."""
    running = [
        replace(e.w, running=tuple(e.placements), in_quota=e.in_quota)
        for e in state.entries.values()
    ]
    return replace(snap, workloads=tuple(running))


@RELABEL
@given(running_sets(), st.data())
def test_labels_moved_entry_by_entry_give_the_tables_a_rebuild_gives(
    snap: Snapshot, data: st.DataObject
) -> None:
    state = State(snap)
    label_running(state)
    for _ in range(data.draw(st.integers(1, 3), label="rounds")):
        for q, pool in list(state.train_at):
            state.lowest_priority(q, pool)  # known before the moves, so they must keep it
        names = sorted(state.entries)
        gone = data.draw(st.lists(st.sampled_from(names), unique=True) if names else st.just([]))
        removed = [state.remove(n) for n in gone]
        for q, pool in list(state.train_at):
            state.lowest_priority(q, pool)  # asked between evictions and restores, as searches do
        # a failed victim search puts its candidates back; a victim may restart at once,
        # starting now with whatever label its admission gave it
        for e in removed:
            how = data.draw(st.sampled_from(("evicted", "restored", "restarted")))
            if how == "restored":
                state.restore(e)
            elif how == "restarted":
                w = replace(e.w, running=(), started_at=None, last_checkpoint_at=None)
                in_quota = data.draw(st.booleans())
                for p in e.placements:
                    state.add_replica(w, p.node, p.devices, in_quota)
        # a replica given back, and maybe placed again (a scale-up that did not fit)
        wide = sorted(n for n, e in state.entries.items() if len(e.placements) > 1)
        for n in data.draw(st.lists(st.sampled_from(wide), unique=True) if wide else st.just([])):
            e = state.entries[n]
            last = e.placements[-1]
            state.drop_new_replicas(e.w, len(e.placements) - 1)
            if data.draw(st.booleans()):
                state.add_replica(e.w, last.node, last.devices, e.in_quota)
        settle(state)
        fresh = State(running_now(state, snap))
        fresh.relabel({n: e.in_quota for n, e in state.entries.items()})
        assert tables(state) == tables(fresh)


@RELABEL
@given(clusters())
def test_the_cycle_labels_its_running_set_as_a_fresh_classification_would(snap: Snapshot) -> None:
    result = run_cycle(snap)
    after = next_snapshot(snap, result)
    assert dict(result.classification) == classify(after)
