"""Choices for workloads, pods and events."""

from __future__ import annotations

from django.db import models


class Kind(models.TextChoices):
    """What sort of workload."""

    TRAINING = "training", "Training job"
    INFERENCE = "inference", "Inference service"
    INTERACTIVE = "interactive", "Interactive instance"


class Status(models.TextChoices):
    """A workload's status."""

    QUEUED = "Queued"
    RUNNING = "Running"
    REQUEUED = "Requeued"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    STOPPED = "Stopped"
    CANCELLED = "Cancelled"


ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING, Status.REQUEUED)
WAITING_STATUSES = (Status.QUEUED, Status.REQUEUED)
ENDED_STATUSES = (Status.SUCCEEDED, Status.FAILED, Status.STOPPED, Status.CANCELLED)


class PodStatus(models.TextChoices):
    """A replica's status; Resource Preempted is what a victim's pods show."""

    PENDING = "Pending"
    RUNNING = "Running"
    PREEMPTED = "Resource Preempted"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    STOPPED = "Stopped"


LIVE_POD_STATUSES = (PodStatus.PENDING, PodStatus.RUNNING)


class IdlePolicy(models.TextChoices):
    """Whether a training job may run on borrowed (idle) capacity."""

    NONE = "none", "None"
    ACCEPTABLE = "acceptable", "Acceptable"
    IDLE_ONLY = "idle_only", "Only Idle Resources"


class RestartMode(models.TextChoices):
    """How fault tolerance restarts a job: all replicas, or only the failed one."""

    SYNC = "sync", "Restart the whole job"
    ASYNC = "async", "Restart only the failed replica"


class FailurePolicy(models.TextChoices):
    """Which failures fault tolerance retries (PAI's fault-tolerance policies)."""

    ANY = "any", "Any failure"
    EXIT_CODE_AND_ERROR_MSG = "ExitCodeAndErrorMsg", "By exit code and error message"


class EventKind(models.TextChoices):
    """Entries of a workload's timeline."""

    SUBMITTED = "submitted"
    ADMITTED = "admitted"
    PLACED = "placed"
    STARTED = "started"
    PREEMPTED = "preempted"
    PREEMPTOR = "preemptor"
    RESTARTED = "restarted"
    RESUMED = "resumed"
    CHECKPOINT = "checkpoint"
    SCALED = "scaled"
    LIMIT = "limit"  # an admin lowered its time limit
    FAULT = "fault"
    FINISHED = "finished"
    CANCELLED = "cancelled"
