"""What a quota calendar rule would do if it fired now (its blast radius), and the link to a
what-if replay of the last 7 days with the rule in force."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from django.urls import reverse

from console.errors import DomainError
from dashboard.selectors.quotas import (
    ScalePreview,
    quota_rebalance_preview,
    quota_scale_preview,
)
from quotas.amounts import Amounts
from quotas.choices import CalendarAction
from quotas.models import CalendarRule, Quota
from quotas.selectors import quota_amounts


@dataclass(frozen=True)
class BlastRadius:
    """A rule fired now: each quota's GPU guarantee before and after, and the running jobs
    whose label would flip; or the refusal the quota services would give."""

    guarantees: list[tuple[str, int, int]]  # (quota, GPUs before, GPUs after)
    preview: ScalePreview | None
    refused: str = ""


def _gpus(quota: Quota, pool_id: int) -> int:
    return quota_amounts(quota).get(pool_id, Amounts()).min_gpu // 1000


def calendar_blast_radius(rule: CalendarRule, *, now: datetime) -> BlastRadius:
    """Try the rule's action in a savepoint that is rolled back (the Scale and Rebalance
    previews), so nothing changes and a refusal reads as the service's, with its numbers."""
    if rule.action == CalendarAction.LEND_IDLE:
        return BlastRadius(guarantees=[], preview=None)
    assert rule.node_pool is not None
    gpus, pool = rule.gpus or 0, rule.node_pool
    try:
        if rule.action == CalendarAction.SCALE:
            current = quota_amounts(rule.quota).get(pool.pk, Amounts())
            preview = quota_scale_preview(
                actor=None,
                quota=rule.quota,
                resources={pool: current.with_min("gpu", gpus * 1000)},
                now=now,
            )
            before = current.min_gpu // 1000
            return BlastRadius([(rule.quota.name, before, gpus)], preview)
        assert rule.target is not None
        preview = quota_rebalance_preview(
            actor=None,
            source=rule.quota,
            target=rule.target,
            node_pool=pool,
            gpu=gpus * 1000,
            now=now,
        )
    except DomainError as error:
        return BlastRadius(guarantees=[], preview=None, refused=error.message)
    source, target = _gpus(rule.quota, pool.pk), _gpus(rule.target, pool.pk)
    guarantees = [
        (rule.quota.name, source, source - gpus),
        (rule.target.name, target, target + gpus),
    ]
    return BlastRadius(guarantees, preview)


def what_if_url(rule: CalendarRule) -> str:
    """The what-if page prefilled with a replay of the last 7 days with the rule in force."""
    base = reverse("whatif:new")
    change = {
        "kind": "calendar",
        "rule": {
            "cron": rule.cron,
            "timezone": rule.timezone,
            "exclude_dates": list(rule.exclude_dates),
            "action": rule.action,
            "quota": rule.quota.name,
            "to": rule.target.name if rule.target else None,
            "gpus": rule.gpus,
            "on": rule.lend_idle,
        },
    }
    query = urlencode({"window": "7d", "changes": json.dumps([change], separators=(",", ":"))})
    return f"{base}?{query}"
