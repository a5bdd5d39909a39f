"""The quota tree over the cluster's node pools, with its audit log."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from cluster.models import NodePool, ResourcePool
from console import clock
from quotas.choices import AuditAction, CalendarAction, CalendarOutcome, QueueStrategy


class Quota(models.Model):
    """A node of the quota tree: guaranteed min and optional max per node pool."""

    resource_pool = models.ForeignKey(ResourcePool, on_delete=models.PROTECT, related_name="quotas")
    parent = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="children"
    )
    name = models.CharField(max_length=100, unique=True)
    over_quota_weight = models.FloatField(
        null=True, blank=True, help_text="Share of borrowed capacity; empty = proportional to min."
    )
    child_preemption = models.BooleanField(default=False)
    lend_idle = models.BooleanField(default=True)
    queue_strategy = models.CharField(
        max_length=10, choices=QueueStrategy.choices, default=QueueStrategy.PRIORITY
    )
    allowed_node_pools = models.ManyToManyField(
        NodePool,
        blank=True,
        related_name="restricted_quotas",
        help_text="The only node pools its workloads may run in; empty = every pool its "
        "parent allows.",
    )
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class QuotaResource(models.Model):
    """A quota's min and max on one node pool: GPU in milli-GPU, CPU millicores, memory MiB."""

    quota = models.ForeignKey(Quota, on_delete=models.CASCADE, related_name="resources")
    node_pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="+")
    min_gpu = models.PositiveBigIntegerField(default=0)
    min_cpu = models.PositiveBigIntegerField(default=0)
    min_memory = models.PositiveBigIntegerField(default=0)
    max_gpu = models.PositiveBigIntegerField(null=True, blank=True)
    max_cpu = models.PositiveBigIntegerField(null=True, blank=True)
    max_memory = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["node_pool__name"]
        constraints = [
            models.UniqueConstraint(fields=["quota", "node_pool"], name="one_row_per_quota_pool")
        ]

    def as_dict(self) -> dict[str, Any]:
        """The row's numbers keyed by resource, as kept in the audit log."""
        return {
            "min": {"gpu": self.min_gpu, "cpu": self.min_cpu, "memory": self.min_memory},
            "max": {"gpu": self.max_gpu, "cpu": self.max_cpu, "memory": self.max_memory},
        }


class QuotaAudit(models.Model):
    """Who changed a quota, when, and its state before and after."""

    quota = models.ForeignKey(
        Quota, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit"
    )
    quota_name = models.CharField(max_length=100)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    action = models.CharField(max_length=12, choices=AuditAction.choices)
    # What made the change when no user did: "calendar rule nightly-loan".
    via = models.CharField(max_length=150, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    at = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        ordering = ["-at", "-id"]


class CalendarRule(models.Model):
    """A scheduled quota change: at each cron time (in its zone), rebalance, scale or set
    lend-idle, except on its exclude-dates."""

    name = models.CharField(max_length=100, unique=True)
    cron = models.CharField(max_length=100)
    timezone = models.CharField(max_length=64, default="UTC")
    # Local dates ("2026-12-25") in the rule's time zone on which it does not fire.
    exclude_dates = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    action = models.CharField(max_length=10, choices=CalendarAction.choices)
    quota = models.ForeignKey(Quota, on_delete=models.PROTECT, related_name="calendar_rules")
    # The sibling a rebalance moves the guarantee to.
    target = models.ForeignKey(
        Quota, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    node_pool = models.ForeignKey(
        NodePool, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    gpus = models.PositiveIntegerField(null=True, blank=True)  # whole GPUs moved or scaled to
    lend_idle = models.BooleanField(null=True, blank=True)  # the lend-idle value it sets
    created_at = models.DateTimeField()
    # The latest firing handled: a watermark, moved on without running when the schedule changes.
    last_fired_at = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_outcome = models.CharField(max_length=10, choices=CalendarOutcome.choices, blank=True)
    last_run_result = models.CharField(max_length=500, blank=True)
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask", on_delete=models.SET_NULL, null=True, blank=True
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
