"""Proposed changes applied to a recording's cluster, tree and scaling (pure functions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

from jobs.scheduling import types as core
from jobs.scheduling.snapshot import State

from ..changes import describe
from .types import ConfigChange, Recording, Scaling

TREE_KINDS = ("scale", "rebalance", "child_preemption", "lend_idle", "weight")
UNLIMITED = 10**15  # an unset max, as jobs.bridge.snapshot gives it to the core


@dataclass(frozen=True)
class Setup:
    """One configuration to replay: the cluster, the tree, the scaling and timed changes."""

    nodes: tuple[core.Node, ...]
    quotas: tuple[core.Quota, ...]
    scalings: tuple[Scaling, ...]
    timed: tuple[ConfigChange, ...]


def _pool(q: core.Quota, change: Mapping[str, object]) -> str:
    pool = change.get("pool")
    if isinstance(pool, str):
        return pool
    pools = [p for p, r in q.min.items() if r.gpu] or list(q.min)
    if len(pools) != 1:
        raise ValueError(f"{q.name} has {len(pools)} node pools: name the pool")
    return pools[0]


def _set_min(q: core.Quota, pool: str, milli: int) -> core.Quota:
    if milli < 0:
        raise ValueError(f"{q.name} would have {milli / 1000:g} GPUs in {pool}")
    old = q.min.get(pool, core.Resources())
    return replace(q, min={**q.min, pool: core.Resources(milli, old.cpu, old.memory)})


def apply_tree(
    quotas: tuple[core.Quota, ...],
    change: Mapping[str, object],
    nodes: tuple[core.Node, ...],
    *,
    check: bool = True,
) -> tuple[core.Quota, ...]:
    """The tree after one change; ValueError when it breaks the tree's sums (if `check`)."""
    by = {q.name: q for q in quotas}
    kind = change["kind"]
    if kind == "scale":
        q = by[str(change["quota"])]
        by[q.name] = _set_min(q, _pool(q, change), round(float(str(change["gpus"])) * 1000))
    elif kind == "rebalance":
        src, dst = by[str(change["from"])], by[str(change["to"])]
        pool = _pool(src, change)
        milli = round(float(str(change["gpus"])) * 1000)
        have = src.min.get(pool, core.Resources()).gpu
        if milli > have:
            raise ValueError(
                f"{src.name} guarantees {have / 1000:g} GPUs in {pool}; "
                f"{milli / 1000:g} cannot move"
            )
        by[src.name] = _set_min(src, pool, have - milli)
        by[dst.name] = _set_min(dst, pool, dst.min.get(pool, core.Resources()).gpu + milli)
    elif kind == "child_preemption":
        q = by[str(change["quota"])]
        by[q.name] = replace(q, child_preemption=bool(change["on"]))
    elif kind == "lend_idle":
        q = by[str(change["quota"])]
        by[q.name] = replace(q, lend_idle=bool(change["on"]))
    elif kind == "weight":
        q = by[str(change["quota"])]
        by[q.name] = replace(q, weight=float(str(change["weight"])))
    elif kind == "state":  # a recorded change of the tree (quota audit), as absolute values
        q = by[str(change["quota"])]
        state = change["state"]
        assert isinstance(state, Mapping)
        by[q.name] = quota_from_state(q, state)
    out = tuple(by[q.name] for q in quotas)
    if check:
        check_tree(out, nodes)
    return out


def _amounts(values: Mapping[str, object], unset: int) -> core.Resources:
    def one(key: str) -> int:
        v = values.get(key)
        return unset if v is None else int(str(v))

    return core.Resources(one("gpu"), one("cpu"), one("memory"))


def quota_from_state(q: core.Quota, state: Mapping[str, Any]) -> core.Quota:
    """A quota as an audit record's state describes it (quotas.services.quota_state)."""
    resources: Mapping[str, Mapping[str, Mapping[str, object]]] = state.get("resources", {})
    maxes = {p: r.get("max") or {} for p, r in resources.items()}
    has_max = any(v is not None for m in maxes.values() for v in m.values())
    weight = state.get("over_quota_weight")
    return replace(
        q,
        min={p: _amounts(r.get("min") or {}, 0) for p, r in resources.items()},
        max={p: _amounts(m, UNLIMITED) for p, m in maxes.items()} if has_max else None,
        child_preemption=bool(state.get("child_preemption", q.child_preemption)),
        lend_idle=bool(state.get("lend_idle", q.lend_idle)),
        weight=None if weight is None else float(weight),
        queue=str(state.get("queue_strategy", q.queue)),
        pools=tuple(state.get("allowed_node_pools", q.pools)),
    )


def check_tree(quotas: tuple[core.Quota, ...], nodes: tuple[core.Node, ...]) -> None:
    """ValueError, in the core's words, when the tree breaks its sums."""
    try:
        State(core.Snapshot(0.0, nodes, quotas, ()))
    except core.ScenarioError as exc:
        raise ValueError(str(exc)) from None


def apply_nodes(nodes: tuple[core.Node, ...], pool: str, add: int) -> tuple[core.Node, ...]:
    """Add nodes shaped like the pool's first, or remove its last ones."""
    mine = [n for n in nodes if n.pool == pool]
    if not mine:
        raise ValueError(f"{pool} has no nodes to copy or remove")
    if add < 0:
        if -add > len(mine):
            raise ValueError(f"{pool} has only {len(mine)} nodes; {-add} cannot go")
        gone = {n.name for n in mine[add:]}
        return tuple(n for n in nodes if n.name not in gone)
    model = mine[0]
    new = tuple(replace(model, name=f"{pool}-whatif-{i + 1}") for i in range(add))
    return nodes + new


def firings(
    cron: str, tz: str, start: float, end: float, excludes: Sequence[str] = ()
) -> list[float]:
    """Firing times of a cron rule in its time zone within (start, end], minus exclude-dates."""
    from zoneinfo import ZoneInfo

    from console.cron import parse

    expr = parse(cron)
    skip = {date.fromisoformat(d) for d in excludes}
    zone = ZoneInfo(tz)
    at = datetime.fromtimestamp(start, UTC)
    out: list[float] = []
    while True:
        nxt = expr.next_after(at, tz)
        if nxt is None or nxt.timestamp() > end:
            return out
        if nxt.astimezone(zone).date() not in skip:
            out.append(nxt.timestamp())
        at = nxt


def setup(rec: Recording, changes: Sequence[Mapping[str, object]]) -> Setup:
    """The configuration with every change applied; ValueError names the change refused."""
    nodes, quotas, scalings = rec.nodes, rec.quotas, list(rec.scalings)
    timed: list[ConfigChange] = list(rec.history)
    for i, change in enumerate(changes):
        kind = change["kind"]
        try:
            if kind == "nodes":
                nodes = apply_nodes(nodes, str(change["pool"]), int(str(change["add"])))
            elif kind in TREE_KINDS:
                # the tree is checked once all changes are in: they apply together
                quotas = apply_tree(quotas, change, nodes, check=False)
            elif kind == "scaling_rules":
                service = str(change["service"])
                scalings = [s for s in scalings if s.service != service or not s.by_rule]
                rules = change["rules"]
                assert isinstance(rules, list)
                for r in rules:
                    for at in firings(r["cron"], r["timezone"], rec.warm_start, rec.end):
                        scalings.append(Scaling(at, service, int(r["replicas"])))
            elif kind == "calendar":
                rule = change["rule"]
                assert isinstance(rule, dict)
                inner = {**rule, "kind": rule["action"], "from": rule.get("quota")}
                label = describe(change)
                for at in firings(
                    rule["cron"], rule["timezone"], rec.warm_start, rec.end, rule["exclude_dates"]
                ):
                    timed.append(ConfigChange(at, label, inner))
        except ValueError as exc:
            raise ValueError(f"changes[{i}] ({describe(change)}): {exc}") from None
    try:
        check_tree(quotas, nodes)
    except ValueError as exc:
        raise ValueError(f"the changes together: {exc}") from None
    return Setup(nodes, quotas, tuple(scalings), tuple(timed))


def baseline(rec: Recording) -> Setup:
    """The configuration as recorded, the tree's recorded changes included."""
    return Setup(rec.nodes, rec.quotas, rec.scalings, rec.history)
