"""Choices for the quota app."""

from __future__ import annotations

from django.db import models


class QueueStrategy(models.TextChoices):
    """How a quota orders its pending workloads."""

    PRIORITY = "priority", "Priority, then FIFO"
    FIFO = "fifo", "FIFO"


class AuditAction(models.TextChoices):
    """What a quota audit record describes."""

    CREATE = "create", "Created"
    UPDATE = "update", "Updated"
    SCALE = "scale", "Scaled"
    REBALANCE = "rebalance", "Rebalanced"
    TOGGLE = "toggle", "Toggled child-level preemption"
    DELETE = "delete", "Deleted"


class CalendarAction(models.TextChoices):
    """What a quota calendar rule does when it fires."""

    REBALANCE = "rebalance", "Move GPUs of guarantee to a sibling"
    SCALE = "scale", "Scale the GPU guarantee"
    LEND_IDLE = "lend_idle", "Set lend-idle"


class CalendarOutcome(models.TextChoices):
    """How a calendar rule's last handled firing went."""

    OK = "ok", "Applied"
    UNCHANGED = "unchanged", "No change"
    SKIPPED = "skipped", "Skipped (exclude-date)"
    FAILED = "failed", "Failed"
