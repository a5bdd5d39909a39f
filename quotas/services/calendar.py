"""The quota calendar: scheduled rebalance, scale or lend-idle, each a django-celery-beat task.

A rule fires through the same services as a manual change (quota_rebalance,
quota_scale_outcome, quota_update), so the tree's invariants hold and the audit log names the
rule. A firing those services refuse (a sibling grew meanwhile, the sums would break) changes
nothing and records why, with the numbers, as the rule's last outcome, which the quota pages
show platform admins. Firing follows the scaling rules' discipline (console.schedules): the
write lock, then the rule's row, then the watermark, so each due time applies once whichever
worker or runner tick gets there.
"""

from __future__ import annotations

import logging
from datetime import date, datetime
from typing import Any

from django.db import transaction

from cluster.locking import write_lock
from cluster.models import NodePool
from console import clock
from console.cron import CronExpr, parse, zone
from console.errors import DomainError, NameTaken
from console.names import check_display_name
from console.schedules import (
    due_firing,
    periodic_task_drop,
    periodic_task_sync,
    skip_past_firings,
)
from console.units import called
from quotas.amounts import Amounts
from quotas.choices import CalendarAction, CalendarOutcome
from quotas.models import CalendarRule, Quota
from quotas.selectors import quota_amounts
from quotas.services.quotas import quota_rebalance, quota_scale_outcome, quota_update

log = logging.getLogger(__name__)
FIRE_TASK = "quotas.tasks.calendar_rule_fire"
RULE_FIELDS = (
    "name",
    "cron",
    "timezone",
    "exclude_dates",
    "enabled",
    "action",
    "quota",
    "target",
    "node_pool",
    "gpus",
    "lend_idle",
)


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def _sentence(text: str) -> str:
    """Text with its first letter capital (str.capitalize would lower the rest)."""
    return text[:1].upper() + text[1:]


def action_words(rule: CalendarRule) -> str:
    """What the rule does, in words: "move 32 GPUs of guarantee from Quota 1.2 to Quota 1.1"."""
    if rule.action == CalendarAction.REBALANCE:
        return (
            f"move {_gpus(rule.gpus or 0)} of guarantee on {rule.node_pool} from "
            f"{rule.quota} to {rule.target}"
        )
    if rule.action == CalendarAction.SCALE:
        return f"scale {rule.quota} to {_gpus(rule.gpus or 0)} guaranteed on {rule.node_pool}"
    if rule.lend_idle:
        return f"{rule.quota} lends its idle GPUs"
    return f"{rule.quota} stops lending its idle GPUs"


# Checks --------------------------------------------------------------------------------------


def _exclude_dates(value: Any) -> list[str]:
    """Exclude-dates as sorted unique ISO dates; a list, or text split on commas and spaces."""
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    if items is None:
        return []
    if not isinstance(items, list | tuple):
        raise DomainError(
            "Exclude-dates must be a list of dates (YYYY-MM-DD).", field="exclude_dates"
        )
    found: set[str] = set()
    for item in items:
        if isinstance(item, date):
            found.add(item.isoformat())
            continue
        text = str(item).strip()
        try:
            found.add(date.fromisoformat(text).isoformat())
        except ValueError:
            raise DomainError(
                f"Exclude-date {text!r} is not a date: write it as YYYY-MM-DD, such as 2026-12-25.",
                field="exclude_dates",
            ) from None
    return sorted(found)


def _whole_gpus(value: Any, *, least: int) -> int:
    """A whole number of GPUs, at least `least`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise DomainError(f"GPUs must be a whole number, not {value!r}.", field="gpus")
    if value < least:
        raise DomainError(f"GPUs must be at least {least}, not {value}.", field="gpus")
    return value


def _node_pool(quota: Quota, node_pool: NodePool | None) -> NodePool:
    """The rule's node pool: the one given (in the quota's resource pool) or the only one."""
    if node_pool is None:
        pools = list(NodePool.objects.filter(resource_pool_id=quota.resource_pool_id)[:2])
        if len(pools) != 1:
            raise DomainError(
                f"Name the node pool: resource pool {quota.resource_pool.name} has "
                f"{'several' if pools else 'none'}.",
                field="node_pool",
            )
        return pools[0]
    if node_pool.resource_pool_id != quota.resource_pool_id:
        raise DomainError(
            f"Node pool {node_pool.name} is not in {called(quota.name)}'s resource pool "
            f"{quota.resource_pool.name}.",
            field="node_pool",
        )
    return node_pool


def _validated(values: dict[str, Any], rule: CalendarRule | None) -> CronExpr:
    """Check a rule's values in place (trimming text, clearing what its action ignores)."""
    name = str(values["name"] or "")
    if not name.strip():
        raise DomainError("Give the rule a name.", field="name")
    values["name"] = check_display_name(name.strip(), what="rule name")
    clash = CalendarRule.objects.filter(name=values["name"])
    if rule is not None:
        clash = clash.exclude(pk=rule.pk)
    if clash.exists():
        raise NameTaken(f"A calendar rule named {values['name']!r} already exists.", field="name")
    values["cron"] = " ".join(str(values["cron"] or "").split())
    cron = parse(values["cron"], field="cron")
    values["timezone"] = str(values["timezone"] or "").strip()
    zone(values["timezone"], field="timezone")
    values["exclude_dates"] = _exclude_dates(values["exclude_dates"])
    values["enabled"] = bool(values["enabled"])
    action = values["action"]
    if action not in CalendarAction.values:
        raise DomainError(
            f"Action {action!r} is not one of {', '.join(CalendarAction.values)}.", field="action"
        )
    quota = values["quota"]
    if not isinstance(quota, Quota):
        raise DomainError("Choose the quota the rule changes.", field="quota")
    if action == CalendarAction.LEND_IDLE:
        if not isinstance(values["lend_idle"], bool):
            raise DomainError(
                "Say whether the quota lends its idle GPUs (on or off).", field="lend_idle"
            )
        values.update(target=None, node_pool=None, gpus=None)
        return cron
    values["lend_idle"] = None
    values["node_pool"] = _node_pool(quota, values["node_pool"])
    if action == CalendarAction.SCALE:
        values["gpus"] = _whole_gpus(values["gpus"], least=0)
        values["target"] = None
        return cron
    values["gpus"] = _whole_gpus(values["gpus"], least=1)
    target = values["target"]
    if not isinstance(target, Quota):
        raise DomainError("Choose the sibling quota that receives the GPUs.", field="target")
    if target.pk == quota.pk:
        raise DomainError("A rebalance needs two different quotas.", field="target")
    if target.parent_id != quota.parent_id or target.resource_pool_id != quota.resource_pool_id:
        raise DomainError(
            f"{target.name} is not a sibling of {quota.name}: a rebalance moves guarantee "
            "between quotas of the same parent.",
            field="target",
        )
    return cron


# Rules and their beat tasks ------------------------------------------------------------------


def _sync_periodic_task(rule: CalendarRule, cron: CronExpr) -> None:
    """Create or update the rule's beat task so it matches the rule."""
    except_ = f", except {', '.join(rule.exclude_dates)}" if rule.exclude_dates else ""
    periodic_task_sync(
        rule,
        cron,
        name=f"Quota calendar rule {rule.pk}: {rule.name}",
        task_path=FIRE_TASK,
        description=(
            f"{_sentence(action_words(rule))} at {rule.cron} ({rule.timezone}){except_}. "
            "Managed by Tidepool: edit the calendar rule, not this task."
        ),
    )


@transaction.atomic
def calendar_rule_create(*, now: datetime, **fields: Any) -> CalendarRule:
    """Add a quota calendar rule, with its beat task."""
    unknown = sorted(set(fields) - set(RULE_FIELDS))
    if unknown:
        raise DomainError(f"A calendar rule has no field {unknown[0]!r}.", field=unknown[0])
    values: dict[str, Any] = {
        "timezone": "UTC",
        "exclude_dates": [],
        "enabled": True,
        "target": None,
        "node_pool": None,
        "gpus": None,
        "lend_idle": None,
        **{key: fields.get(key) for key in ("name", "cron", "action", "quota")},
        **fields,
    }
    parsed = _validated(values, None)
    rule = CalendarRule.objects.create(created_at=now, **values)
    _sync_periodic_task(rule, parsed)
    return rule


@transaction.atomic
def calendar_rule_update(
    *, rule: CalendarRule, now: datetime | None = None, **fields: Any
) -> CalendarRule:
    """Change any of a rule's fields; a new schedule does not fire retroactively."""
    unknown = sorted(set(fields) - set(RULE_FIELDS))
    if unknown:
        raise DomainError(f"A calendar rule has no field {unknown[0]!r}.", field=unknown[0])
    rule = CalendarRule.objects.select_for_update().get(pk=rule.pk)
    values: dict[str, Any] = {key: getattr(rule, key) for key in RULE_FIELDS}
    before = dict(values)
    values.update(fields)
    parsed = _validated(values, rule)
    for key, value in values.items():
        setattr(rule, key, value)
    schedule = ("cron", "timezone", "exclude_dates")
    if any(values[k] != before[k] for k in schedule) or (
        values["enabled"] and not before["enabled"]
    ):
        skip_past_firings(rule, parsed, now or clock.now())
    rule.save()
    _sync_periodic_task(rule, parsed)
    return rule


@transaction.atomic
def calendar_rule_delete(*, rule: CalendarRule) -> None:
    """Remove a rule and its beat task."""
    rule = CalendarRule.objects.select_related("periodic_task").get(pk=rule.pk)
    task = rule.periodic_task
    rule.delete()
    periodic_task_drop(task)


# Firing --------------------------------------------------------------------------------------


def _ran(rule: CalendarRule, firing: datetime, outcome: str, result: str) -> None:
    """Mark the firing handled and say how it went: the calendar page's "last run"."""
    rule.last_fired_at = rule.last_run_at = firing
    rule.last_outcome = outcome
    rule.last_run_result = result[:500]
    rule.save(update_fields=["last_fired_at", "last_run_at", "last_outcome", "last_run_result"])


def _min_gpus(quota: Quota, node_pool: NodePool) -> int:
    """The quota's guaranteed whole GPUs on that node pool now."""
    return quota_amounts(quota).get(node_pool.pk, Amounts()).min_gpu // 1000


def _apply(rule: CalendarRule) -> tuple[str, str]:
    """Run the rule's action through the quota services: (outcome, what it did)."""
    via = f"calendar rule {rule.name}"
    quota, node_pool, gpus = rule.quota, rule.node_pool, rule.gpus or 0
    if rule.action == CalendarAction.LEND_IDLE:
        if quota.lend_idle == rule.lend_idle:
            state = "lends" if quota.lend_idle else "does not lend"
            return CalendarOutcome.UNCHANGED, f"No change: {quota.name} already {state} idle GPUs."
        quota_update(actor=None, quota=quota, lend_idle=rule.lend_idle, via=via)
        return CalendarOutcome.OK, f"{_sentence(action_words(rule))} from now on."
    assert node_pool is not None
    if rule.action == CalendarAction.SCALE:
        current = quota_amounts(quota).get(node_pool.pk, Amounts())
        before = current.min_gpu // 1000
        outcome = quota_scale_outcome(
            actor=None,
            quota=quota,
            resources={node_pool: current.with_min("gpu", gpus * 1000)},
            via=via,
        )
        if not outcome.changed:
            return CalendarOutcome.UNCHANGED, (
                f"No change: {quota.name} already guarantees {_gpus(gpus)} on {node_pool.name}."
            )
        return CalendarOutcome.OK, (
            f"Scaled {quota.name} on {node_pool.name} from {before} to {gpus} GPUs guaranteed."
        )
    target = rule.target
    assert target is not None
    was = (_min_gpus(quota, node_pool), _min_gpus(target, node_pool))
    quota_rebalance(
        actor=None, source=quota, target=target, node_pool=node_pool, gpu=gpus * 1000, via=via
    )
    return CalendarOutcome.OK, (
        f"Moved {_gpus(gpus)} of guarantee on {node_pool.name} from {quota.name} to "
        f"{target.name}: {quota.name} {was[0]} → {was[0] - gpus}, "
        f"{target.name} {was[1]} → {was[1] + gpus}."
    )


@transaction.atomic
def calendar_rule_fire(*, rule: CalendarRule, now: datetime) -> bool:
    """Apply the rule's latest firing at or before now, once; returns whether it changed a quota.

    A firing on an exclude-date (the local date in the rule's zone) is marked handled without
    running. A firing the quota services refuse changes nothing: its outcome is Failed, with
    the services' message, which names the numbers.
    """
    write_lock()  # before the rule's row lock: the write lock always comes first
    locked = CalendarRule.objects.select_for_update().select_related("quota", "target", "node_pool")
    current = locked.filter(pk=rule.pk).first()  # None if deleted since the tick was queued
    if current is None:
        return False
    rule = current
    firing = due_firing(rule, now)
    if firing is None:
        return False
    day = firing.astimezone(zone(rule.timezone)).date().isoformat()
    if day in rule.exclude_dates:
        _ran(rule, firing, CalendarOutcome.SKIPPED, f"Skipped: {day} is an exclude-date.")
        return False
    try:
        outcome, result = _apply(rule)
    except DomainError as error:
        # The services' transaction rolled back, so nothing changed; say why, with numbers.
        log.warning("calendar rule %s did not fire: %s", rule.name, error.message)
        _ran(rule, firing, CalendarOutcome.FAILED, f"Did not {action_words(rule)}: {error.message}")
        return False
    _ran(rule, firing, outcome, result)
    return outcome == CalendarOutcome.OK


def calendar_rules_fire_due(*, now: datetime) -> int:
    """Fire every enabled rule that is due (the embedded runner's tick), oldest firing first;
    returns how many changed a quota."""
    rules = CalendarRule.objects.filter(enabled=True).only(
        "id", "cron", "timezone", "enabled", "created_at", "last_fired_at"
    )
    due = [(firing, rule) for rule in rules if (firing := due_firing(rule, now)) is not None]
    due.sort(key=lambda pair: (pair[0], pair[1].pk))
    return sum(1 for _, rule in due if calendar_rule_fire(rule=rule, now=now))


def next_firing(rule: CalendarRule, after: datetime) -> datetime | None:
    """When the rule fires next after that time, in its zone, skipping exclude-dates."""
    if not rule.enabled:
        return None
    tz = zone(rule.timezone)
    cron = parse(rule.cron)
    when: datetime | None = after
    for _ in range(1000):  # bounded: exclude-dates are finitely many
        assert when is not None
        when = cron.next_after(when, tz)
        if when is None:
            return None
        if when.astimezone(tz).date().isoformat() not in rule.exclude_dates:
            return when.astimezone(tz)
    return None
