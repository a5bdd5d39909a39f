"""Thin, idempotent control-loop tasks: Celery runs them in the distributed mode, the
embedded runner calls the same functions on the same schedule."""

from __future__ import annotations

from celery import shared_task

from console import clock

# Periodic tasks expire within their interval, so missed ticks never pile up.
SCHEDULE = {
    "jobs.tasks.backend_sync": 5.0,
    "jobs.tasks.scheduling_cycle": 5.0,
    "jobs.tasks.scaling_rules_due": 30.0,
    "quotas.tasks.calendar_rules_due": 30.0,
    "jobs.tasks.time_limits": 30.0,
    "jobs.tasks.usage_sample": 60.0,
}


@shared_task(name="jobs.tasks.scheduling_cycle")
def scheduling_cycle() -> int:
    """Run one scheduling cycle (skipped if another is running); returns admissions."""
    from jobs.services.cycle import scheduling_cycle_run
    from jobs.wakeup import cycle_started

    cycle_started()

    return scheduling_cycle_run(now=clock.now()).admitted


@shared_task(name="jobs.tasks.backend_sync")
def backend_sync() -> int:
    """Apply what the cluster reported since the last sync."""
    from jobs.services.sync import backend_sync as sync

    return sync(now=clock.now())


@shared_task(name="jobs.tasks.scaling_rule_fire")
def scaling_rule_fire(rule_id: int) -> bool:
    """Fire one scheduled scaling rule if it is due (Celery beat's crontab entry)."""
    from jobs.models import ScalingRule
    from jobs.services.scaling import scaling_rule_fire as fire

    rule = ScalingRule.objects.select_related("service").filter(pk=rule_id).first()
    return bool(rule and fire(rule=rule, now=clock.now()))


@shared_task(name="jobs.tasks.scaling_rules_due")
def scaling_rules_due() -> int:
    """Fire every scaling rule that is due (catches up after downtime)."""
    from jobs.services.scaling import scaling_rules_fire_due

    return scaling_rules_fire_due(now=clock.now())


@shared_task(name="jobs.tasks.time_limits")
def time_limits() -> int:
    """Stop interactive instances past their maximum duration."""
    from jobs.services.limits import interactive_time_limits_enforce

    return interactive_time_limits_enforce(now=clock.now())


@shared_task(name="jobs.tasks.usage_sample")
def usage_sample() -> int:
    """Record one usage sample per quota."""
    from jobs.services.usage import usage_sample as sample

    return len(sample(now=clock.now()))
