"""Scenario JSON: parse and validate into a Snapshot, and render a CycleResult back."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .snapshot import State
from .types import (
    MILLI,
    CycleResult,
    Node,
    Placement,
    Quota,
    Resources,
    ScenarioError,
    Snapshot,
    Workload,
)


def _num(obj: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float:
    """A required (or defaulted) non-negative number field."""
    if key not in obj or obj[key] is None:
        if default is None:
            raise ScenarioError(f"{where}: field {key!r} is required")
        return default
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise ScenarioError(f"{where}: field {key!r} must be a non-negative number, not {v!r}")
    return float(v)


def _int(obj: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    """A non-negative whole number field."""
    v = _num(obj, key, where, None if default is None else float(default))
    if v != int(v):
        raise ScenarioError(f"{where}: field {key!r} must be a whole number, not {v!r}")
    return int(v)


def gpu_milli(v: float, where: str) -> int:
    """GPUs (possibly fractional) as milli-GPU, refusing finer than one milli."""
    milli = round(v * MILLI)
    if abs(milli - v * MILLI) > 1e-6:
        raise ScenarioError(f"{where}: gpu {v!r} is finer than one milli-GPU")
    return milli


def _str(obj: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    v = obj.get(key, default)
    if not isinstance(v, str) or not v:
        raise ScenarioError(f"{where}: field {key!r} must be a non-empty string")
    return v


def _resources(obj: Any, where: str) -> Resources:
    if not isinstance(obj, Mapping):
        raise ScenarioError(f'{where}: must be an object like {{"gpu": 8}}')
    return Resources(
        gpu_milli(_num(obj, "gpu", where, 0), where),
        _int(obj, "cpu", where, 0),
        _int(obj, "memory", where, 0),
    )


def _per_pool(obj: Any, where: str) -> dict[str, Resources]:
    if not isinstance(obj, Mapping):
        raise ScenarioError(f"{where}: must map node pools to resources")
    return {str(p): _resources(r, f"{where}.{p}") for p, r in obj.items()}


def _pool_names(v: Any, where: str) -> tuple[str, ...]:
    """A quota's allowed node pools: a list of names, empty for every pool."""
    if not isinstance(v, list) or not all(isinstance(p, str) and p for p in v):
        raise ScenarioError(f"{where}: pools must be a list of node pool names")
    return tuple(v)


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    v = data.get(key, [])
    if not isinstance(v, list):
        raise ScenarioError(f"field {key!r} must be a list")
    return v


def load_scenario(data: Any) -> Snapshot:
    """Parse a scenario; raise ScenarioError with one clear sentence when it is malformed."""
    if not isinstance(data, Mapping):
        raise ScenarioError("the scenario must be a JSON object")
    nodes = []
    for i, n in enumerate(_list(data, "nodes")):
        where = f"nodes[{i}]"
        if not isinstance(n, Mapping):
            raise ScenarioError(f"{where}: must be an object")
        nodes.append(
            Node(
                _str(n, "name", where),
                _str(n, "pool", where),
                _int(n, "gpus", where, 0),
                _int(n, "cpu", where, 0),
                _int(n, "memory", where, 0),
                bool(n.get("schedulable", True)),
            )
        )
    quotas = []
    for i, q in enumerate(_list(data, "quotas")):
        where = f"quotas[{i}]"
        if not isinstance(q, Mapping):
            raise ScenarioError(f"{where}: must be an object")
        name = _str(q, "name", where)
        where = f"quota {name!r}"
        parent = q.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise ScenarioError(f"{where}: parent must be a quota name or null")
        weight = q.get("weight")
        if weight is not None and (
            isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0
        ):
            raise ScenarioError(f"{where}: weight must be a positive number or null")
        quotas.append(
            Quota(
                name,
                parent,
                _per_pool(q.get("min", {}), f"{where}.min"),
                None if q.get("max") is None else _per_pool(q["max"], f"{where}.max"),
                bool(q.get("child_preemption", False)),
                bool(q.get("lend_idle", True)),
                None if weight is None else float(weight),
                str(q.get("queue", "priority")),
                _pool_names(q.get("pools", []), where),
            )
        )
    workloads = []
    for i, w in enumerate(_list(data, "workloads")):
        workloads.append(_workload(w, f"workloads[{i}]"))
    now = _num(data, "now", "scenario", 0)
    scope = str(data.get("idle_scope", "tree"))
    snap = Snapshot(now, tuple(nodes), tuple(quotas), tuple(workloads), scope)
    State(snap)  # validates the tree, the names and the running set's allocation
    return snap


def _workload(w: Any, where: str) -> Workload:
    if not isinstance(w, Mapping):
        raise ScenarioError(f"{where}: must be an object")
    name = _str(w, "name", where)
    where = f"workload {name!r}"
    state = w.get("state", "pending")
    if state not in ("running", "pending"):
        raise ScenarioError(f"{where}: state must be running or pending")
    pools = w.get("pools")
    if not isinstance(pools, list) or not pools or not all(isinstance(p, str) for p in pools):
        raise ScenarioError(f"{where}: pools must be a non-empty list of node pool names")
    running: tuple[Placement, ...] = ()
    if state == "running":
        names = w.get("nodes")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise ScenarioError(f"{where}: a running workload lists its nodes, one per replica")
        running = tuple(Placement(n) for n in names)
    elif w.get("nodes"):
        raise ScenarioError(f"{where}: a pending workload has no nodes")
    started = w.get("started_at")
    ckpt = w.get("last_checkpoint_at")
    label = w.get("in_quota")
    if label is not None and not isinstance(label, bool):
        raise ScenarioError(f"{where}: in_quota must be true, false or absent")
    if label is not None and state != "running":
        raise ScenarioError(f"{where}: only a running workload has an In Quota label")
    return Workload(
        name=name,
        quota=_str(w, "quota", where),
        kind=_str(w, "kind", where, "training"),
        replicas=_int(w, "replicas", where, 1),
        request=Resources(
            gpu_milli(_num(w, "gpu", where, 0), where),
            _int(w, "cpu", where, 0),
            _int(w, "memory", where, 0),
        ),
        pools=tuple(pools),
        priority=_int(w, "priority", where, 5),
        idle=_str(w, "idle", where, "none"),
        running=running,
        submitted_at=_num(w, "submitted_at", where, 0),
        started_at=None if started is None else _num(w, "started_at", where),
        last_checkpoint_at=None if ckpt is None else _num(w, "last_checkpoint_at", where),
        in_quota=label,
    )


def render_result(result: CycleResult) -> dict[str, Any]:
    """The cycle's decisions in the CLI's JSON shape."""
    return {
        "admitted": [
            {
                "workload": a.workload,
                "in_quota": a.in_quota,
                "nodes": [p.node for p in a.placements],
                "devices": [list(p.devices) for p in a.placements],
            }
            for a in result.admitted
        ],
        "preempted": [
            {
                "workload": p.workload,
                "by": p.by,
                "reason": p.reason,
                "quota": p.quota,
                "work_lost_gpu_seconds": round(p.work_lost_gpu_seconds, 3),
            }
            for p in result.preempted
        ],
        "classification": {
            name: ("in_quota" if ok else "not_in_quota")
            for name, ok in sorted(result.classification.items())
        },
        "pending": [{"workload": p.workload, "reason": p.reason} for p in result.pending],
        "demoted": [
            {"workload": d.workload, "by": d.by, "reason": d.reason, "quota": d.quota}
            for d in result.demoted
        ],
        "unsettled": result.unsettled,
    }
