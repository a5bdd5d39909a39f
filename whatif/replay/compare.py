"""Replay a recording as configured and with the changes, and compare the two runs."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .apply import Setup, apply_tree, baseline, setup
from .sim import SKIP_QUIET_CYCLES, Outcome, Replay
from .types import Recording

FIDELITY_POINTS = 2.0  # the baseline's allocation per quota within 2 points of the recorded
AFFECTED_ROWS = 15
HOUR = 3600.0


def run_once(
    rec: Recording,
    config: Setup,
    progress: Callable[[float], None] | None = None,
    *,
    skip_quiet: bool = SKIP_QUIET_CYCLES,
) -> Outcome:
    """One replay of the recording under one configuration."""
    nodes = config.nodes
    return Replay(
        rec,
        nodes=nodes,
        quotas=config.quotas,
        scalings=config.scalings,
        timed=config.timed,
        apply_change=lambda quotas, change: apply_tree(quotas, change, nodes),
        skip_quiet=skip_quiet,
    ).run(progress)


def what_if(
    rec: Recording,
    changes: Sequence[Mapping[str, object]],
    progress: Callable[[float], None] | None = None,
    *,
    skip_quiet: bool = SKIP_QUIET_CYCLES,
) -> dict[str, Any]:
    """Both runs and their comparison, as JSON-ready values; ValueError for a refused change."""
    proposed = setup(rec, changes)

    def part(offset: float) -> Callable[[float], None] | None:
        return None if progress is None else (lambda f: progress(offset + f / 2))

    base = run_once(rec, baseline(rec), part(0.0), skip_quiet=skip_quiet)
    prop = run_once(rec, proposed, part(0.5), skip_quiet=skip_quiet)
    quotas = [q.name for q in rec.quotas]
    return {
        "window": {
            "start": _iso(rec.start),
            "end": _iso(rec.end),
            "hours": round((rec.end - rec.start) / HOUR, 2),
        },
        "quotas": {q: {"baseline": _quota(base, q), "proposal": _quota(prop, q)} for q in quotas},
        "finishing": _finishing(base, prop, rec.tick),
        "cluster": {"baseline": _cluster(base), "proposal": _cluster(prop)},
        "fidelity": fidelity(rec, base),
        "series": {
            "hours": [_iso(h) for h in base.hours],
            "quotas": {
                q: {
                    "baseline": [round(v / 1000, 2) for v in base.hourly.get(q, [])],
                    "proposal": [round(v / 1000, 2) for v in prop.hourly.get(q, [])],
                }
                for q in quotas
            },
        },
        "affected": affected(base, prop),
        "refused_firings": prop.refused_changes,
        "notes": list(rec.notes),
        "cycles": {"baseline": base.cycles, "proposal": prop.cycles},
    }


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat()


def _percentile(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def _minutes(v: float | None) -> float | None:
    return None if v is None else round(v / 60, 1)


def _quota(out: Outcome, quota: str) -> dict[str, Any]:
    """One quota's figures in one run."""
    in_q = out.in_quota.get(quota, 0.0) / 1000 / HOUR
    borrowed = out.borrowed.get(quota, 0.0) / 1000 / HOUR
    waits = [
        start - submit
        for q, submit, start, _, _ in out.workloads.values()
        if q == quota and start is not None
    ]
    never = sum(1 for q, _, start, _, _ in out.workloads.values() if q == quota and start is None)
    return {
        "gpu_hours": round(in_q + borrowed, 1),
        "in_quota_gpu_hours": round(in_q, 1),
        "borrowed_gpu_hours": round(borrowed, 1),
        "wait_median_min": _minutes(statistics.median(waits) if waits else None),
        "wait_p95_min": _minutes(_percentile(waits, 95)),
        "never_started": never,
        "preemptions": dict(sorted(out.preemptions.get(quota, {}).items())),
        "lost_gpu_hours": round(out.lost_gpu_seconds.get(quota, 0.0) / HOUR, 2),
    }


def _cluster(out: Outcome) -> dict[str, Any]:
    capacity_seconds = out.capacity * out.seconds
    return {
        "allocation_pct": round(100 * out.allocated_gpu_seconds / capacity_seconds, 2)
        if capacity_seconds
        else 0.0,
        "idle_gpu_hours": round(out.idle_gpu_seconds / 1000 / HOUR, 1),
        "scale_ups": out.scale_ups,
        "scale_ups_ready_in_one_cycle": out.scale_ups_ready,
    }


def _end(row: tuple[str, float, float | None, float | None, str]) -> float:
    return row[3] if row[3] is not None and row[4] == "Succeeded" else float("inf")


def _finishing(base: Outcome, prop: Outcome, tick: float) -> dict[str, dict[str, int]]:
    """Per quota: workloads that finish later or earlier under the proposal."""
    out: dict[str, dict[str, int]] = {}
    for name, b in base.workloads.items():
        p = prop.workloads.get(name)
        if p is None:
            continue
        counts = out.setdefault(b[0], {"later": 0, "earlier": 0})
        eb, ep = _end(b), _end(p)
        if ep > eb + tick / 2:
            counts["later"] += 1
        elif ep < eb - tick / 2:
            counts["earlier"] += 1
    return out


def affected(base: Outcome, prop: Outcome) -> list[dict[str, Any]]:
    """The workloads whose wait or finish moved most, largest change first."""
    rows: list[tuple[float, float, dict[str, Any]]] = []
    for name, b in base.workloads.items():
        p = prop.workloads.get(name)
        if p is None:
            continue
        wait_b = None if b[2] is None else b[2] - b[1]
        wait_p = None if p[2] is None else p[2] - p[1]
        eb, ep = _end(b), _end(p)
        if eb != float("inf") and ep != float("inf"):
            delta = ep - eb
        elif eb == ep:
            delta = 0.0
        else:
            delta = float("inf") if ep == float("inf") else float("-inf")
        wait_delta = (wait_p or 0.0) - (wait_b or 0.0)
        if delta == 0 and wait_delta == 0 and b[4] == p[4]:
            continue
        key = abs(delta) if abs(delta) != float("inf") else 1e18
        rows.append(
            (
                key,
                abs(wait_delta),
                {
                    "workload": name,
                    "quota": b[0],
                    "wait_baseline_min": _minutes(wait_b),
                    "wait_proposal_min": _minutes(wait_p),
                    "finish_delta_min": None if abs(delta) == float("inf") else _minutes(delta),
                    "finish": "later" if delta > 0 else "earlier" if delta < 0 else "same",
                    "status_baseline": b[4],
                    "status_proposal": p[4],
                },
            )
        )
    rows.sort(key=lambda r: (-r[0], -r[1], r[2]["workload"]))
    return [row for _, _, row in rows[:AFFECTED_ROWS]]


def fidelity(rec: Recording, base: Outcome) -> dict[str, Any]:
    """The baseline's allocation per quota against the recorded samples, in points of capacity."""
    capacity = base.capacity or 1
    seconds = base.seconds or 1.0
    rows = {}
    for q in (q.name for q in rec.quotas):
        replayed = (base.in_quota.get(q, 0.0) + base.borrowed.get(q, 0.0)) / seconds
        recorded = rec.recorded_alloc.get(q, 0.0)
        rows[q] = {
            "recorded_pct": round(100 * recorded / capacity, 2),
            "replayed_pct": round(100 * replayed / capacity, 2),
            "diff_points": round(100 * abs(replayed - recorded) / capacity, 2),
        }
    recorded_total = sum(rec.recorded_alloc.values())
    replayed_total = base.allocated_gpu_seconds / seconds
    worst = max((r["diff_points"] for r in rows.values()), default=0.0)
    return {
        "samples": rec.recorded_samples,
        "tolerance_points": FIDELITY_POINTS,
        "quotas": rows,
        "recorded_pct": round(100 * recorded_total / capacity, 2),
        "replayed_pct": round(100 * replayed_total / capacity, 2),
        "max_diff_points": worst,
        "within_tolerance": bool(rec.recorded_samples) and worst <= FIDELITY_POINTS,
    }
