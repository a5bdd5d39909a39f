"""Proposed changes: one schema and its validation for the page, the API and the CLI.

A change is a JSON object with a `kind`:

    {"kind": "scale", "quota": "Quota 1.1", "gpus": 56}                 (pool: optional)
    {"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 1.1", "gpus": 8}
    {"kind": "child_preemption", "quota": "Quota 1", "on": true}
    {"kind": "lend_idle", "quota": "Quota 1.2", "on": false}
    {"kind": "weight", "quota": "Quota 1.1", "weight": 2}
    {"kind": "nodes", "pool": "A100-80G", "add": 2}                      (negative removes)
    {"kind": "scaling_rules", "service": "workspace_a/llm-chat",
     "rules": [{"cron": "0 8 * * *", "timezone": "UTC", "replicas": 8}]}
    {"kind": "calendar", "rule": {"cron": "0 22 * * 1-5", "timezone": "Europe/Berlin",
     "exclude_dates": ["2026-12-25"], "action": "rebalance", "quota": "Quota 1.2",
     "to": "Quota 1.1", "gpus": 32}}                  (action: rebalance, scale or lend_idle)

Every error is a ChangeError naming the field (`changes[0].gpus`) and the reason. This module
imports no Django: the CLI parses its options with it before sending them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

KINDS = (
    "scale",
    "rebalance",
    "child_preemption",
    "lend_idle",
    "weight",
    "nodes",
    "scaling_rules",
    "calendar",
)
CALENDAR_ACTIONS = ("rebalance", "scale", "lend_idle")
MAX_CHANGES = 20


class ChangeError(ValueError):
    """A proposed change that cannot be replayed: `field` names where, the message why."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


@dataclass(frozen=True)
class Names:
    """What exists, to check the names a change refers to (None: not checked)."""

    quotas: Collection[str] | None = None
    pools: Collection[str] | None = None
    services: Collection[str] | None = None
    siblings: Mapping[str, str | None] = field(default_factory=dict)  # quota -> parent


def _name(obj: Mapping[str, Any], key: str, where: str, known: Collection[str] | None) -> str:
    v = obj.get(key)
    if not isinstance(v, str) or not v.strip():
        raise ChangeError("must be a non-empty name", field=f"{where}.{key}")
    if known is not None and v not in known:
        raise ChangeError(f"there is no {v!r}", field=f"{where}.{key}")
    return v


def _number(obj: Mapping[str, Any], key: str, where: str, *, signed: bool = False) -> float:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ChangeError("must be a number", field=f"{where}.{key}")
    if not signed and v < 0:
        raise ChangeError(f"must not be negative, not {v}", field=f"{where}.{key}")
    return float(v)


def _gpus(obj: Mapping[str, Any], key: str, where: str, *, positive: bool = False) -> float:
    v = _number(obj, key, where)
    if round(v * 1000) != v * 1000:
        raise ChangeError(f"{v} is finer than one milli-GPU", field=f"{where}.{key}")
    if positive and v <= 0:
        raise ChangeError("must be more than 0 GPUs", field=f"{where}.{key}")
    return v


def _flag(obj: Mapping[str, Any], key: str, where: str) -> bool:
    v = obj.get(key)
    if not isinstance(v, bool):
        raise ChangeError("must be true or false", field=f"{where}.{key}")
    return v


def _cron(obj: Mapping[str, Any], where: str) -> tuple[str, str]:
    """A cron expression and its time zone, checked by console.cron."""
    from console.cron import parse, zone
    from console.errors import DomainError

    cron = obj.get("cron")
    tz = obj.get("timezone", "UTC")
    if not isinstance(cron, str):
        raise ChangeError("must be a cron expression such as 0 8 * * *", field=f"{where}.cron")
    if not isinstance(tz, str):
        raise ChangeError("must be a time zone name such as UTC", field=f"{where}.timezone")
    try:
        parse(cron, field="cron")
    except DomainError as exc:
        raise ChangeError(exc.message, field=f"{where}.cron") from None
    try:
        zone(tz)
    except DomainError as exc:
        raise ChangeError(exc.message, field=f"{where}.timezone") from None
    return cron, tz


def _siblings(a: str, b: str, where: str, names: Names) -> None:
    if a == b:
        raise ChangeError("must name another quota than from", field=f"{where}.to")
    if names.siblings and names.siblings.get(a) != names.siblings.get(b):
        raise ChangeError(f"{b!r} is not a sibling of {a!r}", field=f"{where}.to")


def validate_change(raw: Any, where: str, names: Names) -> dict[str, Any]:
    """One change, checked and normalised; a ChangeError names the bad field."""
    if not isinstance(raw, Mapping):
        raise ChangeError('must be an object with a "kind"', field=where)
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ChangeError(f"must be one of {', '.join(KINDS)}", field=f"{where}.kind")
    q = names.quotas
    if kind == "scale":
        out: dict[str, Any] = {
            "kind": kind,
            "quota": _name(raw, "quota", where, q),
            "gpus": _gpus(raw, "gpus", where),
        }
        if raw.get("pool") is not None:
            out["pool"] = _name(raw, "pool", where, names.pools)
        return out
    if kind == "rebalance":
        src, dst = _name(raw, "from", where, q), _name(raw, "to", where, q)
        _siblings(src, dst, where, names)
        out = {
            "kind": kind,
            "from": src,
            "to": dst,
            "gpus": _gpus(raw, "gpus", where, positive=True),
        }
        if raw.get("pool") is not None:
            out["pool"] = _name(raw, "pool", where, names.pools)
        return out
    if kind in ("child_preemption", "lend_idle"):
        return {"kind": kind, "quota": _name(raw, "quota", where, q), "on": _flag(raw, "on", where)}
    if kind == "weight":
        weight = _number(raw, "weight", where)
        if weight <= 0:
            raise ChangeError("must be more than 0", field=f"{where}.weight")
        return {"kind": kind, "quota": _name(raw, "quota", where, q), "weight": weight}
    if kind == "nodes":
        add = _number(raw, "add", where, signed=True)
        if add != int(add) or add == 0:
            raise ChangeError("must be a whole number of nodes, not 0", field=f"{where}.add")
        return {"kind": kind, "pool": _name(raw, "pool", where, names.pools), "add": int(add)}
    if kind == "scaling_rules":
        service = _name(raw, "service", where, names.services)
        rules = raw.get("rules")
        if not isinstance(rules, list):
            raise ChangeError("must be a list of rules", field=f"{where}.rules")
        checked = []
        for i, rule in enumerate(rules):
            at = f"{where}.rules[{i}]"
            if not isinstance(rule, Mapping):
                raise ChangeError("must be an object", field=at)
            cron, tz = _cron(rule, at)
            replicas = _number(rule, "replicas", at)
            if replicas != int(replicas):
                raise ChangeError("must be a whole number", field=f"{at}.replicas")
            checked.append({"cron": cron, "timezone": tz, "replicas": int(replicas)})
        return {"kind": kind, "service": service, "rules": checked}
    return {"kind": kind, "rule": _calendar(raw.get("rule"), f"{where}.rule", names)}


def _calendar(rule: Any, where: str, names: Names) -> dict[str, Any]:
    """A calendar entry: a cron rule with its time zone, exclude-dates and its action."""
    if not isinstance(rule, Mapping):
        raise ChangeError("must be an object with cron, timezone and action", field=where)
    cron, tz = _cron(rule, where)
    excludes = rule.get("exclude_dates", [])
    if not isinstance(excludes, list):
        raise ChangeError("must be a list of dates", field=f"{where}.exclude_dates")
    for i, d in enumerate(excludes):
        try:
            date.fromisoformat(str(d))
        except ValueError:
            raise ChangeError(
                f"{d!r} is not a date like 2026-12-25", field=f"{where}.exclude_dates[{i}]"
            ) from None
    action = rule.get("action")
    if action not in CALENDAR_ACTIONS:
        raise ChangeError(f"must be one of {', '.join(CALENDAR_ACTIONS)}", field=f"{where}.action")
    out: dict[str, Any] = {
        "cron": cron,
        "timezone": tz,
        "exclude_dates": [str(d) for d in excludes],
        "action": action,
    }
    if action == "rebalance":
        inner = validate_change(
            {"kind": "rebalance", "from": rule.get("quota"), **_pick(rule, "to", "gpus", "pool")},
            where,
            names,
        )
        out |= {"quota": inner["from"], "to": inner["to"], "gpus": inner["gpus"]}
    elif action == "scale":
        inner = validate_change(
            {"kind": "scale", **_pick(rule, "quota", "gpus", "pool")}, where, names
        )
        out |= {"quota": inner["quota"], "gpus": inner["gpus"]}
    else:
        inner = validate_change({"kind": "lend_idle", **_pick(rule, "quota", "on")}, where, names)
        out |= {"quota": inner["quota"], "on": inner["on"]}
    if "pool" in inner:
        out["pool"] = inner["pool"]
    return out


def _pick(obj: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: obj[k] for k in keys if k in obj}


def validate_changes(raw: Any, names: Names | None = None) -> list[dict[str, Any]]:
    """The list of changes, each checked; at least one, at most MAX_CHANGES."""
    names = names or Names()
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise ChangeError("must be a JSON list of changes", field="changes") from None
    if not isinstance(raw, list) or not raw:
        raise ChangeError("must be a list of at least one change", field="changes")
    if len(raw) > MAX_CHANGES:
        raise ChangeError(f"at most {MAX_CHANGES} changes at once", field="changes")
    return [validate_change(c, f"changes[{i}]", names) for i, c in enumerate(raw)]


# The CLI's short forms ----------------------------------------------------------------------


def _split(text: str, sep: str, option: str, shape: str) -> tuple[str, str]:
    left, found, right = text.rpartition(sep)
    if not found or not left.strip() or not right.strip():
        raise ChangeError(f"{text!r} is not of the form {shape}", field=option)
    return left.strip(), right.strip()


def _cli_number(text: str, option: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ChangeError(f"{text!r} is not a number", field=option) from None


def _cli_flag(text: str, option: str) -> bool:
    if text.lower() in ("on", "true", "yes"):
        return True
    if text.lower() in ("off", "false", "no"):
        return False
    raise ChangeError(f"{text!r}: say on or off", field=option)


def from_options(
    *,
    scale: Collection[str] = (),
    rebalance: Collection[str] = (),
    child_preemption: Collection[str] = (),
    lend_idle: Collection[str] = (),
    weight: Collection[str] = (),
    nodes: Collection[str] = (),
) -> list[dict[str, Any]]:
    """Changes from `--scale "Quota 1.1=56"`, `--rebalance "Quota 1.2>Quota 1.1=8"`, ….

    Shapes are checked here; the server checks the names and amounts.
    """
    out: list[dict[str, Any]] = []
    for text in scale:
        quota, amount = _split(text, "=", "--scale", "QUOTA=GPUS")
        out.append({"kind": "scale", "quota": quota, "gpus": _cli_number(amount, "--scale")})
    for text in rebalance:
        pair, amount = _split(text, "=", "--rebalance", "FROM>TO=GPUS")
        src, dst = _split(pair, ">", "--rebalance", "FROM>TO=GPUS")
        gpus = _cli_number(amount, "--rebalance")
        out.append({"kind": "rebalance", "from": src, "to": dst, "gpus": gpus})
    for option, kind, texts in (
        ("--child-preemption", "child_preemption", child_preemption),
        ("--lend-idle", "lend_idle", lend_idle),
    ):
        for text in texts:
            quota, flag = _split(text, "=", option, "QUOTA=on|off")
            out.append({"kind": kind, "quota": quota, "on": _cli_flag(flag, option)})
    for text in weight:
        quota, amount = _split(text, "=", "--weight", "QUOTA=WEIGHT")
        out.append({"kind": "weight", "quota": quota, "weight": _cli_number(amount, "--weight")})
    for text in nodes:
        pool, amount = _split(text, "=", "--nodes", "POOL=+N|-N")
        count = _cli_number(amount, "--nodes")
        out.append(
            {"kind": "nodes", "pool": pool, "add": int(count) if count.is_integer() else count}
        )
    return out


def describe(change: Mapping[str, Any]) -> str:
    """One line for a change, as the result page and the CLI show it."""
    kind = change["kind"]
    if kind == "scale":
        return f"Scale {change['quota']} to {change['gpus']:g} GPUs"
    if kind == "rebalance":
        return f"Move {change['gpus']:g} GPUs of guarantee from {change['from']} to {change['to']}"
    if kind in ("child_preemption", "lend_idle"):
        what = "child-level preemption" if kind == "child_preemption" else "lending idle GPUs"
        return f"{'Turn on' if change['on'] else 'Turn off'} {what} in {change['quota']}"
    if kind == "weight":
        return f"Over-quota weight of {change['quota']} to {change['weight']:g}"
    if kind == "nodes":
        n = change["add"]
        nodes = "node" if abs(n) == 1 else "nodes"
        return f"{'Add' if n > 0 else 'Remove'} {abs(n)} {nodes} in {change['pool']}"
    if kind == "scaling_rules":
        rules = ", ".join(f"{r['cron']} → {r['replicas']}" for r in change["rules"]) or "none"
        return f"Scaling rules of {change['service']}: {rules}"
    rule = change["rule"]
    return f"Calendar {rule['cron']} ({rule['timezone']}): {rule['action']} {rule['quota']}"
