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
