"""Later rounds of a cycle: a retry answered from an earlier round ends as a real attempt
would, a borrower is not kept waiting by a search that failed under stale fair shares,
capacity lent beyond a fair share is settled before the cycle ends, and a round's victims count
in the fair shares of its borrowing pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.scheduling.cycle import run_cycle

from .retry_check import cluster
from .test_scenarios import pushed_out_then_reclaimed
from .test_stability import next_snapshot

REPO = Path(__file__).resolve().parents[2]


def test_every_retry_answered_from_an_earlier_round_ends_as_a_real_attempt() -> None:
    # the pure core, so that every answer given from an earlier round can be checked
    out = subprocess.run(
        [sys.executable, "-m", "tests.scheduling.retry_check", "1500"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "TIDEPOOL_PURE_CORE": "1"},
        check=True,
    )
    found = json.loads(out.stdout)
    assert found["mismatches"] == []
    assert found["reused"] > 1000  # the check really ran on answers from earlier rounds


# Cycles in which a borrower's fair-share reclaim, which failed in one round under that
# round's shares, was not searched again in the next round under new shares: it waited, and
# the next cycle started it by preempting
@pytest.mark.parametrize("seed", [231, 252, 324, 326, 327, 531, 651])
def test_a_borrower_is_searched_again_under_the_next_rounds_fair_shares(seed: int) -> None:
    snap = cluster(seed)
    first = run_cycle(snap)
    second = run_cycle(next_snapshot(snap, first))
    assert first.admitted
    assert second.admitted == ()
    assert second.preempted == ()


# Cycles in which a borrower took idle capacity beyond its quota's fair share in the pass that
# lends what is left over, and the next cycle's shares, with that capacity counted as borrowed,
# let a borrower below its share reclaim it: the cycle now runs another round and displaces it
# there, rather than start a workload that the next cycle evicts
@pytest.mark.parametrize("seed", [501, 711, 1033, 1353, 1527, 1927, 2301, 2511])
def test_capacity_lent_beyond_a_fair_share_is_settled_in_the_same_cycle(seed: int) -> None:
    snap = cluster(seed)
    first = run_cycle(snap)
    second = run_cycle(next_snapshot(snap, first))
    started = {a.workload for a in first.admitted}
    assert started
    assert not [p.workload for p in second.preempted if p.workload in started]


# Cycles in which a borrower reclaimed capacity by fair share in a round's borrowing pass,
# under shares that left out the workloads that round's In-Quota pass had just evicted: once
# their demand counted, its quota was above its share, but it kept its place for the rest of
# the cycle (it had evicted someone), and the next cycle evicted it for one of those victims
@pytest.mark.parametrize("seed", [779, 2047, 2561, 2947])
def test_a_rounds_victims_count_in_its_fair_shares(seed: int) -> None:
    snap = cluster(seed)
    first = run_cycle(snap)
    second = run_cycle(next_snapshot(snap, first))
    started = {a.workload for a in first.admitted}
    assert started and first.preempted
    assert not [p.workload for p in second.preempted if p.workload in started]


def test_a_cycle_that_runs_out_of_rounds_says_its_decisions_are_unsettled() -> None:
    # p2 evicts b1 in the first round; b1 is retried (and waits) in the second
    snap = pushed_out_then_reclaimed()
    whole = run_cycle(snap)
    assert not whole.unsettled
    assert [p.workload for p in whole.preempted] == ["b1"]
    assert [p.workload for p in whole.pending] == ["b1"]
    cut = run_cycle(snap, rounds=1)
    assert cut.unsettled
    assert [p.workload for p in cut.preempted] == ["b1"]
    assert not cut.pending  # the victim was never retried
    with pytest.raises(ValueError, match="rounds must be 1 or more, got 0"):
        run_cycle(snap, rounds=0)
