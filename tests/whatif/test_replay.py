"""Replay fidelity and determinism on a window the demo's control loop really recorded."""

from __future__ import annotations

from whatif.replay.compare import FIDELITY_POINTS, what_if
from whatif.replay.types import Recording

REBALANCE = [{"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 1.1", "gpus": 8}]


def test_the_recording_holds_the_windows_arrivals_and_the_scale_up(recorded: Recording) -> None:
    kinds = {a.kind for a in recorded.arrivals}
    assert {"training", "inference"} <= kinds
    assert any(s.replicas == 8 for s in recorded.scalings)  # the 08:00 rule firing
    assert recorded.recorded_samples == 180


def test_baseline_replay_matches_the_recorded_allocation_per_quota(recorded: Recording) -> None:
    result = what_if(recorded, REBALANCE)
    fidelity = result["fidelity"]
    assert fidelity["within_tolerance"]
    for quota, row in fidelity["quotas"].items():
        assert row["diff_points"] <= FIDELITY_POINTS, (quota, row)
    # the window was busy: the check compares real allocation, not two zeros
    assert fidelity["recorded_pct"] > 50
    # the 08:00 scale-up got its replicas within one cycle, by child-level preemption
    assert result["cluster"]["baseline"]["scale_ups"] == 1
    assert result["cluster"]["baseline"]["scale_ups_ready_in_one_cycle"] == 1
    assert (
        sum(
            q["baseline"]["preemptions"].get("child_preemption", 0)
            for q in result["quotas"].values()
        )
        >= 1
    )


def test_the_same_window_and_change_give_the_same_result_twice(recorded: Recording) -> None:
    first = what_if(recorded, REBALANCE)
    second = what_if(recorded, REBALANCE)
    assert first == second
    assert first["quotas"]["Quota 1.1"]["proposal"] != first["quotas"]["Quota 1.1"]["baseline"]


def test_a_later_scale_up_rule_shows_in_the_proposal(recorded: Recording) -> None:
    service = next(a.name for a in recorded.arrivals if a.kind == "inference")
    later = [
        {
            "kind": "scaling_rules",
            "service": service,
            "rules": [{"cron": "0 9 * * *", "timezone": "UTC", "replicas": 8}],
        }
    ]
    result = what_if(recorded, later)
    base, prop = result["quotas"]["Quota 1"]["baseline"], result["quotas"]["Quota 1"]["proposal"]
    # an hour less of eight 8-GPU replicas
    assert prop["gpu_hours"] < base["gpu_hours"] - 50
