"""Scale inference services by hand or on a schedule (cron rules in a time zone).

Each rule is mirrored by a django-celery-beat crontab PeriodicTask for the distributed mode;
the embedded runner calls scaling_rules_fire_due() every tick instead. Either way the firing
itself is scaling_rule_fire(), which is idempotent: it works out the latest firing at or
before now and applies it only once, so duplicate, late or retried ticks are harmless.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from cluster.locking import write_lock
from console import clock, metrics
from console.cron import CronExpr, parse, zone
from console.errors import DomainError, NameTaken
from console.names import check_dns_name
from console.schedules import (
    due_firing,
    periodic_task_drop,
    periodic_task_sync,
    skip_past_firings,
)
from jobs.choices import ENDED_STATUSES, EventKind, Kind
from jobs.events import record
from jobs.models import ScalingRule, Workload
from jobs.wakeup import request_cycle

FIRE_TASK = "jobs.tasks.scaling_rule_fire"
RULE_FIELDS = ("name", "cron", "timezone", "target_replicas", "exclude_cron", "enabled")


def _replicas_word(count: int) -> str:
    return "replica" if count == 1 else "replicas"


def _check_range(service: Workload, replicas: int, field: str) -> None:
    """Refuse a replica count outside the service's min..max."""
    if not service.min_replicas <= replicas <= service.max_replicas:
        raise DomainError(
            f"{service.name} runs {service.min_replicas}-{service.max_replicas} replicas; "
            f"{replicas} is out of that range.",
            field=field,
        )


def _check_service(service: Workload) -> None:
    """Only inference services scale."""
    if service.kind != Kind.INFERENCE:
        raise DomainError(
            f"{service.name} is not an inference service; only services scale.", field="service"
        )


@transaction.atomic
def service_scale(
    *,
    service: Workload,
    replicas: int,
    now: datetime,
    actor: Any = None,
    reason: str = "manual",
) -> Workload:
    """Set an inference service's target replicas; the next scheduling cycle acts on it."""
    _check_service(service)
    write_lock()
    service = Workload.objects.select_related("workspace", "quota").get(pk=service.pk)
    if service.status in ENDED_STATUSES:
        raise DomainError(
            f"{service.name} has ended ({service.status}); it cannot be scaled.", field="replicas"
        )
    _check_range(service, replicas, "replicas")
    before = service.replicas
    if before == replicas:
        return service
    service.replicas = replicas
    service.save(update_fields=["replicas"])
    if reason != "manual":
        by = f" by {reason}"
    elif actor is not None and getattr(actor, "is_authenticated", False):
        by = f" by {actor.username}"
    else:
        by = ""
    record(
        service,
        EventKind.SCALED,
        f"Scaled from {before} to {replicas} {_replicas_word(replicas)}{by}",
        at=now,
        before=before,
        after=replicas,
        reason=reason,
        actor=getattr(actor, "username", None),
    )
    request_cycle()
    return service


# Rules ---------------------------------------------------------------------------------------


def _validated(service: Workload, values: dict[str, Any], rule: ScalingRule | None) -> CronExpr:
    """Check a rule's values in place (trimming text); returns its parsed cron."""
    _check_service(service)
    name = str(values["name"])
    if not name.strip():
        raise DomainError("Give the rule a name.", field="name")
    check_dns_name(name, what="rule name")
    clash = ScalingRule.objects.filter(service=service, name=name)
    if rule is not None:
        clash = clash.exclude(pk=rule.pk)
    if clash.exists():
        raise NameTaken(f"{service.name} already has a rule named {name!r}.", field="name")
    values["name"] = name
    values["cron"] = " ".join(str(values["cron"]).split())
    cron = parse(values["cron"], field="cron")
    values["exclude_cron"] = " ".join(str(values["exclude_cron"] or "").split())
    if values["exclude_cron"]:
        parse(values["exclude_cron"], field="exclude_cron")
    values["timezone"] = str(values["timezone"]).strip()
    zone(values["timezone"], field="timezone")
    target = values["target_replicas"]
    if not isinstance(target, int) or isinstance(target, bool):
        raise DomainError(
            f"Target replicas must be a whole number, not {target!r}.", field="target_replicas"
        )
    _check_range(service, target, "target_replicas")
    values["enabled"] = bool(values["enabled"])
    return cron


def _task_name(rule: ScalingRule) -> str:
    return f"Scaling rule {rule.pk}: {rule.service.name} / {rule.name}"[:200]


def _sync_periodic_task(rule: ScalingRule, cron: CronExpr) -> None:
    """Create or update the rule's beat task so it matches the rule."""
    periodic_task_sync(
        rule,
        cron,
        name=_task_name(rule),
        task_path=FIRE_TASK,
        description=(
            f"Set {rule.service.name} to {rule.target_replicas} "
            f"{_replicas_word(rule.target_replicas)} at {rule.cron} ({rule.timezone})"
            + (f", except {rule.exclude_cron}" if rule.exclude_cron else "")
            + ". Managed by Tidepool: edit the scaling rule, not this task."
        ),
    )


@transaction.atomic
def scaling_rule_create(
    *,
    service: Workload,
    name: str,
    cron: str,
    timezone: str,
    target_replicas: int,
    exclude_cron: str = "",
    enabled: bool = True,
    now: datetime,
) -> ScalingRule:
    """Add a scheduled scaling rule to an inference service, with its beat task."""
    values: dict[str, Any] = {
        "name": name,
        "cron": cron,
        "timezone": timezone,
        "target_replicas": target_replicas,
        "exclude_cron": exclude_cron,
        "enabled": enabled,
    }
    parsed = _validated(service, values, None)
    rule = ScalingRule.objects.create(service=service, created_at=now, **values)
    _sync_periodic_task(rule, parsed)
    return rule


@transaction.atomic
def scaling_rule_update(
    *, rule: ScalingRule, now: datetime | None = None, **fields: Any
) -> ScalingRule:
    """Change a rule's name, cron, time zone, target, exclusions or enabled flag.

    A new schedule (or re-enabling) does not fire retroactively: the latest firing under the
    new schedule up to now counts as handled, as it would for a rule created now.
    """
    unknown = sorted(set(fields) - set(RULE_FIELDS))
    if unknown:
        raise DomainError(f"A scaling rule has no field {unknown[0]!r}.", field=unknown[0])
    rule = ScalingRule.objects.select_for_update().select_related("service").get(pk=rule.pk)
    values: dict[str, Any] = {key: getattr(rule, key) for key in RULE_FIELDS}
    before = dict(values)
    values.update(fields)
    parsed = _validated(rule.service, values, rule)
    for key, value in values.items():
        setattr(rule, key, value)
    rescheduled = any(values[k] != before[k] for k in ("cron", "timezone", "exclude_cron")) or (
        values["enabled"] and not before["enabled"]
    )
    if rescheduled:
        skip_past_firings(rule, parsed, now or clock.now())
    rule.save()
    _sync_periodic_task(rule, parsed)
    return rule


@transaction.atomic
def scaling_rule_delete(*, rule: ScalingRule) -> None:
    """Remove a rule and its beat task."""
    rule = ScalingRule.objects.select_related("periodic_task").get(pk=rule.pk)
    task = rule.periodic_task
    rule.delete()
    periodic_task_drop(task)


def scaling_rules_retire(*, service: Workload) -> None:
    """An ended service's rules stay on record, disabled; their beat tasks go."""
    for rule in service.scaling_rules.select_related("periodic_task"):
        task = rule.periodic_task
        rule.enabled, rule.periodic_task = False, None
        rule.save(update_fields=["enabled", "periodic_task"])
        periodic_task_drop(task)


# Firing --------------------------------------------------------------------------------------


def _ran(rule: ScalingRule, firing: datetime, result: str) -> None:
    """Mark the firing handled and say what it did: the console's "last run"."""
    rule.last_fired_at = rule.last_run_at = firing
    rule.last_run_result = result[:300]
    rule.save(update_fields=["last_fired_at", "last_run_at", "last_run_result"])


@transaction.atomic
def scaling_rule_fire(*, rule: ScalingRule, now: datetime) -> bool:
    """Apply the rule's latest firing at or before now, once; returns whether it scaled.

    An excluded firing (its local time matches exclude_cron) or one the service cannot take
    (ended, target out of range) is marked handled without scaling. Every handled firing
    records its time and outcome on the rule (last_run_at, last_run_result); the embedded
    runner and Celery beat both come through here, so that record is the one to show.
    """
    write_lock()  # before the rule's row lock: the write lock always comes first
    locked = ScalingRule.objects.select_for_update().select_related("service").filter(pk=rule.pk)
    current = locked.first()  # None if deleted since the tick was queued
    if current is None:
        return False
    rule = current
    firing = due_firing(rule, now)
    if firing is None:
        return False
    tz = zone(rule.timezone)
    if rule.exclude_cron and parse(rule.exclude_cron).matches(firing.astimezone(tz)):
        _ran(rule, firing, f"Skipped: the exception {rule.exclude_cron} matches.")
        return False
    service = rule.service
    if service.status in ENDED_STATUSES:
        _ran(rule, firing, f"Skipped: {service.name} has ended ({service.status}).")
        return False
    before = service.replicas
    if before == rule.target_replicas:
        _ran(rule, firing, f"No change: already at {before} {_replicas_word(before)}.")
        return False
    try:
        service_scale(
            service=service,
            replicas=rule.target_replicas,
            now=now,
            reason=f"rule {rule.name} ({rule.cron} {rule.timezone})",
        )
    except DomainError as error:
        # The service's range changed since the rule was written: say so on its timeline.
        record(
            service,
            EventKind.SCALED,
            f"Rule {rule.name} did not scale: {error.message}",
            at=now,
            rule=rule.pk,
        )
        _ran(rule, firing, f"Did not scale: {error.message}")
        return False
    target = rule.target_replicas
    _ran(rule, firing, f"Scaled from {before} to {target} {_replicas_word(target)}.")
    quota = service.quota.name
    metrics.after_commit(lambda: metrics.SCALING_FIRINGS.labels(quota=quota).inc())
    return True


def scaling_rules_fire_due(*, now: datetime) -> int:
    """Fire every enabled rule that is due (the embedded runner's tick); returns how many scaled.

    One query loads the rules; only due ones do any more work. When a service has several
    due rules (the runner was down over 08:00 and 22:00), they fire oldest first, so the
    latest one wins.
    """
    rules = ScalingRule.objects.filter(enabled=True).only(
        "id", "cron", "timezone", "enabled", "created_at", "last_fired_at"
    )
    due = [(firing, rule) for rule in rules if (firing := due_firing(rule, now)) is not None]
    due.sort(key=lambda pair: (pair[0], pair[1].pk))
    return sum(1 for _, rule in due if scaling_rule_fire(rule=rule, now=now))


def next_firing(rule: ScalingRule, after: datetime) -> datetime | None:
    """When the rule fires next after that time, in the rule's time zone (None if never)."""
    if not rule.enabled:
        return None
    tz = zone(rule.timezone)
    exclude = parse(rule.exclude_cron) if rule.exclude_cron else None
    cron = parse(rule.cron)
    when: datetime | None = after
    # Skip excluded firings; a bounded number of steps covers long exclusions (weekends).
    for _ in range(1000):
        assert when is not None
        when = cron.next_after(when, tz)
        if when is None:
            return None
        if exclude is None or not exclude.matches(when.astimezone(tz)):
            return when.astimezone(tz)
    return None
