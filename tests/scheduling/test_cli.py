"""`python -m jobs.scheduling explain` through a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

NODE = {"pool": "a100", "gpus": 8, "cpu": 96000, "memory": 786432}


def scenario(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "now": 1000,
        "idle_scope": "tree",
        "nodes": [{"name": f"n{i}", **NODE} for i in range(1, 4)],
        "quotas": [
            {
                "name": "q1",
                "parent": None,
                "min": {"a100": {"gpu": 24}},
                "max": None,
                "child_preemption": True,
                "lend_idle": True,
                "weight": None,
                "queue": "priority",
            },
            {"name": "q1.1", "parent": "q1", "min": {"a100": {"gpu": 8}}},
        ],
        "workloads": [
            {
                "name": "w1",
                "quota": "q1.1",
                "kind": "training",
                "replicas": 2,
                "gpu": 8,
                "cpu": 8000,
                "memory": 65536,
                "pools": ["a100"],
                "priority": 5,
                "idle": "acceptable",
                "state": "running",
                "nodes": ["n1", "n2"],
                "submitted_at": 10,
                "started_at": 20,
                "last_checkpoint_at": 900,
            },
            {
                "name": "w2",
                "quota": "q1",
                "kind": "inference",
                "replicas": 2,
                "gpu": 8,
                "pools": ["a100"],
                "state": "pending",
            },
            {
                "name": "w3",
                "quota": "q1.1",
                "kind": "training",
                "gpu": 0.5,
                "pools": ["a100"],
                "state": "pending",
            },
            {
                "name": "w4",
                "quota": "q1.1",
                "kind": "training",
                "gpu": 16,
                "pools": ["a100"],
                "state": "pending",
            },
        ],
    }
    base.update(overrides)
    return base


def explain(tmp_path: Path, data: Any) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "scenario.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return subprocess.run(
        [sys.executable, "-m", "jobs.scheduling", "explain", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={
            "PYTHONPATH": str(REPO),
            "TIDEPOOL_PURE_CORE": os.environ.get("TIDEPOOL_PURE_CORE", ""),
        },
    )


def test_explain_prints_the_decisions_as_json(tmp_path: Path) -> None:
    out = explain(tmp_path, scenario())
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {
        "admitted",
        "preempted",
        "classification",
        "pending",
        "demoted",
        "unsettled",
    }
    assert data["admitted"][0]["workload"] == "w2"
    assert data["admitted"][0]["in_quota"] is True
    assert data["admitted"][0]["nodes"] == ["n3", "n1"]
    assert data["preempted"] == [
        {
            "workload": "w1",
            "by": "w2",
            "reason": "reclaim",
            "quota": "q1",
            "work_lost_gpu_seconds": 1600.0,
        }
    ]
    assert data["demoted"] == []
    assert data["unsettled"] is False  # its rounds left nothing to retry
    assert data["classification"] == {"w2": "in_quota", "w3": "in_quota"}
    assert data["pending"] == [
        {
            "workload": "w4",
            "reason": "Quota q1.1 has 7.5 of 8 GPUs free in pool a100 (the job needs 16 GPUs), "
            "and idle borrowing is off for this job",
        },
        # the victim waits again, and says why
        {
            "workload": "w1",
            "reason": "Quota q1.1 has 7.5 of 8 GPUs free in pool a100 (the job needs 16 GPUs), "
            "and only 7.5 idle GPUs can be borrowed there (it needs 16 GPUs)",
        },
    ]


def test_explain_keeps_a_restricted_quota_out_of_other_pools(tmp_path: Path) -> None:
    data = scenario()
    data["nodes"].append({"name": "t1", **NODE, "pool": "t4"})
    data["quotas"][1]["pools"] = ["a100"]
    data["workloads"][2]["pools"] = ["t4"]
    out = explain(tmp_path, data)
    assert out.returncode == 0, out.stderr
    pending = {p["workload"]: p["reason"] for p in json.loads(out.stdout)["pending"]}
    assert pending["w3"] == "Quota q1.1 may not use pool t4; it may run only in a100"


def _mutate(fn: Any) -> dict[str, Any]:
    data = scenario()
    fn(data)
    return data


MALFORMED = {
    "unknown_quota": _mutate(lambda d: d["workloads"][0].update(quota="nope")),
    "cycle_in_tree": _mutate(lambda d: d["quotas"][0].update(parent="q1.1")),
    "child_min_over_parent": _mutate(lambda d: d["quotas"][1].update(min={"a100": {"gpu": 32}})),
    "over_allocated_node": _mutate(lambda d: d["workloads"][0].update(nodes=["n1", "n1"])),
    "unknown_node": _mutate(lambda d: d["workloads"][0].update(nodes=["n1", "n9"])),
    "negative_gpu": _mutate(lambda d: d["workloads"][1].update(gpu=-1)),
    "quota_pools_not_a_list": _mutate(lambda d: d["quotas"][1].update(pools="a100")),
    "not_json": "{nope",
}


@pytest.mark.parametrize("data", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_scenario_exits_2_with_one_line(tmp_path: Path, data: Any) -> None:
    out = explain(tmp_path, data)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
