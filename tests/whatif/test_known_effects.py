"""Known effects on small recorded scenarios, replayed through the real core (no database)."""

from __future__ import annotations

from typing import Any

from jobs.scheduling import types as core
from whatif.replay.compare import what_if
from whatif.replay.types import Arrival, Recording

POOL = "A100"
HOUR = 3600.0


def _quota(name: str, parent: str | None, gpus: int) -> core.Quota:
    return core.Quota(name, parent, {POOL: core.Resources(gpus * 1000)})


def _job(name: str, quota: str, at: float, *, hours: float = 1.0, idle: str = "none") -> Arrival:
    return Arrival(
        name=name,
        quota=quota,
        kind="training",
        replicas=1,
        request=core.Resources(8000),
        pools=(POOL,),
        submitted_at=at,
        idle=idle,
        total_work=8 * hours * HOUR,
        checkpoint_interval=1800,
    )


def _recording(arrivals: list[Arrival], hours: float = 8) -> Recording:
    """Two 8-GPU nodes under Quota 1 (16 GPUs), split 8 and 8 between Quota 1.1 and 1.2."""
    return Recording(
        start=0.0,
        end=hours * HOUR,
        warm_start=0.0,
        nodes=tuple(core.Node(f"n{i}", POOL, 8, 64_000, 512_000) for i in range(2)),
        quotas=(
            _quota("Quota 1", None, 16),
            _quota("Quota 1.1", "Quota 1", 8),
            _quota("Quota 1.2", "Quota 1", 8),
        ),
        arrivals=tuple(arrivals),
    )


def _q(result: dict[str, Any], quota: str, run: str) -> dict[str, Any]:
    return dict(result["quotas"][quota][run])


def test_rebalancing_8_gpus_to_quota_1_1_cuts_its_p95_wait() -> None:
    # Quota 1.1 gets six one-hour jobs at once that never borrow; Quota 1.2 runs one job.
    jobs = [_job(f"b{i}", "Quota 1.1", 60) for i in range(6)] + [
        _job("c0", "Quota 1.2", 60, hours=0.5)
    ]
    rec = _recording(jobs)
    change = [{"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 1.1", "gpus": 8}]
    result = what_if(rec, change)
    before, after = _q(result, "Quota 1.1", "baseline"), _q(result, "Quota 1.1", "proposal")
    assert after["wait_p95_min"] < before["wait_p95_min"]
    # one at a time on 8 GPUs: the sixth waits five hours; two at a time: about two
    assert before["wait_p95_min"] >= 5 * 60
    assert after["wait_p95_min"] <= 3 * 60
    assert result["finishing"]["Quota 1.1"]["earlier"] >= 3


def test_a_quota_made_too_small_shows_the_preemptions_it_would_cause() -> None:
    # Quota 1.1 runs a long job (it may borrow) In Quota; Quota 1.2 later wants 16 GPUs. With
    # Quota 1.1 cut to nothing, the long job runs on borrowed GPUs and is reclaimed.
    jobs = [_job("b-long", "Quota 1.1", 60, hours=6, idle="acceptable")] + [
        _job(f"c{i}", "Quota 1.2", 1800, hours=2) for i in range(2)
    ]
    rec = _recording(jobs)
    change = [
        {"kind": "scale", "quota": "Quota 1.1", "gpus": 0},
        {"kind": "scale", "quota": "Quota 1.2", "gpus": 16},
    ]
    result = what_if(rec, change)
    assert _q(result, "Quota 1.1", "baseline")["preemptions"] == {}
    preempted = _q(result, "Quota 1.1", "proposal")["preemptions"]
    assert preempted.get("reclaim", 0) >= 1
    assert _q(result, "Quota 1.1", "proposal")["lost_gpu_hours"] > 0
    assert any(w["workload"] == "b-long" and w["finish"] == "later" for w in result["affected"])


def test_changes_that_break_the_tree_together_are_refused() -> None:
    rec = _recording([_job("b0", "Quota 1.1", 60)])
    try:
        what_if(rec, [{"kind": "scale", "quota": "Quota 1.1", "gpus": 12}])
    except ValueError as exc:
        assert "the changes together" in str(exc) and "Quota 1" in str(exc)
    else:
        raise AssertionError("a child above its parent's min was replayed")


def _calendar(excludes: list[str]) -> list[dict[str, Any]]:
    rule = {
        "cron": "0 2 * * *",
        "timezone": "UTC",
        "exclude_dates": excludes,
        "action": "rebalance",
        "quota": "Quota 1.2",
        "to": "Quota 1.1",
        "gpus": 8,
    }
    return [{"kind": "calendar", "rule": rule}]


def test_a_calendar_entry_fires_its_action_at_its_cron_time_unless_the_date_is_excluded() -> None:
    # from 02:00 Quota 1.1 may run two jobs at once; before it, one
    jobs = [_job(f"b{i}", "Quota 1.1", 60, hours=1.5) for i in range(6)]
    rec = _recording(jobs, hours=12)
    fired = what_if(rec, _calendar([]))
    base, prop = _q(fired, "Quota 1.1", "baseline"), _q(fired, "Quota 1.1", "proposal")
    assert prop["wait_p95_min"] < base["wait_p95_min"]
    assert fired["refused_firings"] == []
    # 1970-01-01 is the replayed day (the recording starts at 0): excluded, nothing fires
    skipped = what_if(rec, _calendar(["1970-01-01"]))
    assert _q(skipped, "Quota 1.1", "proposal") == _q(skipped, "Quota 1.1", "baseline")


def test_a_calendar_firing_that_would_overdraw_is_refused_and_listed() -> None:
    rec = _recording([_job("b0", "Quota 1.1", 60)], hours=40)
    # every day at 02:00 move 8 more: the second firing finds Quota 1.2 empty
    result = what_if(rec, _calendar([]))
    assert len(result["refused_firings"]) == 1
    assert "Quota 1.2 guarantees 0 GPUs" in result["refused_firings"][0]
