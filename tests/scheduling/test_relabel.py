"""The cycle relabels only the subtrees whose running set changed, as a full relabel would."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.scheduling.classify import classify, classify_entries, reclassify, relabel_entries
from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.snapshot import State
from jobs.scheduling.types import Snapshot

from .test_properties import clusters, running_sets
from .test_stability import next_snapshot

RELABEL = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tables(state: State) -> tuple[dict[object, object], ...]:
    """The state's In-Quota and borrowed tables, without their zero rows."""
    return (
        {k: u for k, u in state.inq.items() if any(u)},
        {k: u for k, u in state.direct_inq.items() if any(u)},
        {k: g for k, g in state.borrowed.items() if g},
        {
            k: {c: u for c, u in row.items() if any(u)}
            for k, row in state.direct_cls.items()
            if any(any(u) for u in row.values())
        },
        {k: set(by) for k, by in state.niq_at.items() if by},
    )


def running_now(state: State, snap: Snapshot) -> Snapshot:
    """The snapshot of the state's running set, as the next cycle would load it."""
    running = [replace(e.w, running=tuple(e.placements)) for e in state.entries.values()]
    return replace(snap, workloads=tuple(running))


@RELABEL
@given(running_sets(), st.data())
def test_relabelling_changed_subtrees_gives_the_full_classification(
    snap: Snapshot, data: st.DataObject
) -> None:
    state = State(snap)
    labels = relabel_entries(state)
    for _ in range(data.draw(st.integers(1, 3), label="rounds")):
        names = sorted(state.entries)
        gone = data.draw(st.lists(st.sampled_from(names), unique=True) if names else st.just([]))
        removed = [state.remove(n) for n in gone]
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
        labels, _ = reclassify(state, labels)
        full = classify_entries(state)
        assert labels.of_all(state) == full
        assert {n: e.in_quota for n, e in state.entries.items()} == full
        fresh = State(running_now(state, snap))
        relabel_entries(fresh)
        assert tables(state) == tables(fresh)


@RELABEL
@given(clusters())
def test_the_cycle_labels_its_running_set_as_a_fresh_classification_would(snap: Snapshot) -> None:
    result = run_cycle(snap)
    after = next_snapshot(snap, result)
    assert dict(result.classification) == classify(after)
