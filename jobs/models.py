"""Workloads (training jobs, inference services, interactive instances), pods, events, usage."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from cluster.models import Node, NodePool
from jobs.choices import EventKind, FailurePolicy, IdlePolicy, Kind, PodStatus, RestartMode, Status
from quotas.models import Quota
from workspaces.models import Workspace


class Workload(models.Model):
    """One schedulable unit: replicas × (milli-GPU, millicores, MiB) in a quota of a workspace."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="workloads")
    quota = models.ForeignKey(Quota, on_delete=models.PROTECT, related_name="workloads")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="workloads"
    )
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    status_reason = models.CharField(max_length=300, blank=True)
    pending_reason = models.CharField(max_length=300, blank=True)
    in_quota = models.BooleanField(null=True, blank=True)

    replicas = models.PositiveIntegerField(default=1, help_text="For services: the target.")
    gpu = models.PositiveIntegerField(default=0, help_text="milli-GPU per replica")
    cpu = models.PositiveIntegerField(default=0, help_text="millicores per replica")
    memory = models.PositiveIntegerField(default=0, help_text="MiB per replica")
    node_pools = models.ManyToManyField(NodePool, related_name="+")
    priority = models.PositiveSmallIntegerField(default=5)
    idle_policy = models.CharField(
        max_length=10, choices=IdlePolicy.choices, default=IdlePolicy.NONE
    )
    image = models.CharField(max_length=300, blank=True)
    command = models.TextField(blank=True)

    # Training: work to do (GPU-seconds, simulated), checkpoints and fault tolerance.
    total_work = models.FloatField(default=0)
    progress = models.FloatField(default=0, help_text="GPU-seconds done")
    checkpoint_interval = models.PositiveIntegerField(default=1800, help_text="seconds")
    checkpoint_progress = models.FloatField(default=0)
    last_checkpoint_at = models.DateTimeField(null=True, blank=True)
    last_progress_at = models.DateTimeField(null=True, blank=True)
    fault_tolerance = models.BooleanField(default=True)
    max_restarts = models.PositiveSmallIntegerField(default=3)
    restart_on_failure = models.BooleanField(default=True)
    restart_on_preemption = models.BooleanField(default=True)
    restart_on_node_loss = models.BooleanField(default=True)
    restart_mode = models.CharField(
        max_length=5, choices=RestartMode.choices, default=RestartMode.SYNC
    )
    hang_minutes = models.PositiveIntegerField(null=True, blank=True)
    # The label of the last checkpoint the job reported (a step number, a path); its time is
    # last_checkpoint_at. Empty: none reported (work lost counts from the attempt's start).
    checkpoint_label = models.CharField(max_length=200, blank=True)
    # ExitCodeAndErrorMsg: exit codes and message patterns that are retried or fail at once.
    failure_policy = models.CharField(
        max_length=24, choices=FailurePolicy.choices, default=FailurePolicy.ANY
    )
    retry_exit_codes = models.JSONField(default=list, blank=True)
    retry_messages = models.JSONField(default=list, blank=True)
    fail_exit_codes = models.JSONField(default=list, blank=True)
    fail_messages = models.JSONField(default=list, blank=True)
    restarts = models.PositiveSmallIntegerField(default=0)
    failures = models.PositiveSmallIntegerField(default=0, help_text="restarts after faults")
    # The simulated backend's fault injection: a hung job makes no progress.
    sim_hung = models.BooleanField(default=False)

    # Inference: the replica range that scaling may move within.
    min_replicas = models.PositiveIntegerField(default=1)
    max_replicas = models.PositiveIntegerField(default=1)

    # Interactive: stopped when it reaches max_duration, or after idle_stop minutes idle.
    max_duration = models.PositiveIntegerField(null=True, blank=True, help_text="seconds")
    idle_stop_minutes = models.PositiveIntegerField(null=True, blank=True)
    # Interactive: the last activity report; idle auto-stop counts from it, not from the start.
    last_activity_at = models.DateTimeField(null=True, blank=True)

    submitted_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="unique_name_in_workspace")
        ]
        indexes = [
            models.Index(fields=["workspace", "status"]),
            models.Index(fields=["status"]),
            models.Index(fields=["kind", "status"]),
            # Lists show a workspace's workloads of one kind, newest first.
            models.Index(fields=["workspace", "kind", "-submitted_at", "-id"], name="list_order"),
            # All jobs shows every workspace's training jobs, newest first (no sort of them all).
            models.Index(fields=["kind", "-submitted_at", "-id"], name="all_list_order"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def total_gpu(self) -> int:
        """milli-GPU over all replicas."""
        return self.gpu * self.replicas


class Pod(models.Model):
    """One replica of a workload on a node; the cluster backend owns its actual state."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="pods")
    index = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField(default=0)
    node = models.ForeignKey(Node, on_delete=models.SET_NULL, null=True, related_name="pods")
    devices = models.JSONField(default=list)
    status = models.CharField(max_length=20, choices=PodStatus.choices, default=PodStatus.PENDING)
    borrowed = models.BooleanField(default=False)
    # The simulated backend's injected fault, reported and cleared at its next observe().
    sim_fault = models.CharField(max_length=40, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    reason = models.CharField(max_length=300, blank=True)
    # The container's termination message (Kubernetes) or the injected fault's (simulated).
    message = models.TextField(blank=True)
    # The checkpoint label this attempt was started from (TIDEPOOL_RESUME_FROM); empty: none.
    resume_from = models.CharField(max_length=200, blank=True)
    # Reports of this attempt: the last heartbeat or progress, and the last progress (0 to 1).
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    reported_progress = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField()
    start_after = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["index", "-attempt"]
        indexes = [models.Index(fields=["status"])]
        constraints = [
            # One pod name (tp-<workload>-<index>-<attempt>) per row: two writers never
            # start the same replica attempt twice.
            models.UniqueConstraint(
                fields=["workload", "index", "attempt"], name="pod_one_row_per_attempt"
            )
        ]

    def __str__(self) -> str:
        return f"{self.workload.name}-{self.index}"

    @property
    def name(self) -> str:
        """The pod's name as the backend knows it."""
        return f"tp-{self.workload_id}-{self.index}-{self.attempt}"


class WorkloadEvent(models.Model):
    """One entry of a workload's timeline."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    kind = models.CharField(max_length=12, choices=EventKind.choices)
    message = models.CharField(max_length=500)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]


class ScalingRule(models.Model):
    """A scheduled scaling rule of an inference service: at each cron time, set the target."""

    service = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="scaling_rules")
    name = models.CharField(max_length=100)
    cron = models.CharField(max_length=100)
    timezone = models.CharField(max_length=64, default="UTC")
    target_replicas = models.PositiveIntegerField()
    exclude_cron = models.CharField(max_length=100, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField()
    # The latest firing handled: a watermark, moved on without running when the schedule changes.
    last_fired_at = models.DateTimeField(null=True, blank=True)
    # The latest firing that ran (embedded runner or beat, both through scaling_rule_fire).
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_run_result = models.CharField(max_length=300, blank=True)
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask", on_delete=models.SET_NULL, null=True, blank=True
    )

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["service", "name"], name="unique_rule_name")]


class UsageSample(models.Model):
    """A quota's usage at one (simulated) minute; the dashboards plot these."""

    at = models.DateTimeField()
    quota = models.ForeignKey(Quota, on_delete=models.CASCADE, related_name="usage_samples")
    gpu_in_quota = models.PositiveBigIntegerField(default=0)
    gpu_borrowed = models.PositiveBigIntegerField(default=0)
    gpu_pending = models.PositiveBigIntegerField(default=0)
    preemptions = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["at", "quota_id"]
        indexes = [models.Index(fields=["quota", "at"]), models.Index(fields=["at"])]


class ControlState(models.Model):
    """The control loop's single row: the cycle lock and the simulated clock's position."""

    sim_now = models.DateTimeField(null=True, blank=True)
    cycles = models.PositiveBigIntegerField(default=0)
    last_cycle_at = models.DateTimeField(null=True, blank=True)
    last_sample_at = models.DateTimeField(null=True, blank=True)


class ClusterInstance(models.Model):
    """This database's id on a shared cluster: the instance label of every pod it owns."""

    instance = models.CharField(max_length=63, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.instance
