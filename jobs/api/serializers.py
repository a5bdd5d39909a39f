"""Serializers of the workload API: training jobs, inference services, interactive instances."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from cluster.models import NodePool
from console import names
from console.api import FiniteFloatField, GPUField, ReplicaGPUField, missing_named, ref, whole
from console.fast.statements import Statement, columns, loaded
from console.numbers import INT32
from jobs.choices import EventKind, FailurePolicy, IdlePolicy, PodStatus, RestartMode
from jobs.models import Pod, ScalingRule, UsageSample, Workload, WorkloadEvent
from jobs.pod_logs import DEFAULT_TAIL, MAX_TAIL
from jobs.services.workloads import Shape
from quotas.models import Quota
from quotas.selectors import quota_pools_in_effect
from workspaces.access import Access
from workspaces.models import Workspace
from workspaces.roles import VIEW


class PodSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """One replica: its node and status (``Resource Preempted`` for a victim)."""

    name = serializers.CharField(read_only=True)
    node = ref(
        read_only=True,
        allow_null=True,
        help_text="Null before placement, and for team members while the pod is borrowed: "
        "only platform admins see which node runs on idle capacity.",
    )
    status = serializers.CharField(
        read_only=True, help_text=f"One of: {', '.join(PodStatus.values)}."
    )

    class Meta:
        model = Pod
        fields = [
            "name",
            "index",
            "attempt",
            "node",
            "status",
            "borrowed",
            "reason",
            "exit_code",
            "message",
            "resume_from",
            "last_heartbeat_at",
            "started_at",
            "ended_at",
        ]
        read_only_fields = fields


class EventSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """One entry of the timeline."""

    kind = serializers.CharField(
        read_only=True, help_text=f"One of: {', '.join(EventKind.values)}."
    )

    class Meta:
        model = WorkloadEvent
        fields = ["at", "kind", "message", "data"]
        read_only_fields = fields
        extra_kwargs = {
            "data": {
                "help_text": "Details by kind. An entry about pods on borrowed capacity has "
                '"borrowed": true, and its node names ("nodes", "node") only for platform '
                "admins."
            }
        }


COMMON = [
    "id",
    "name",
    "kind",
    "workspace",
    "quota",
    "owner",
    "status",
    "status_reason",
    "pending_reason",
    "in_quota",
    "replicas",
    "gpu",
    "cpu",
    "memory",
    "node_pools",
    "priority",
    "restarts",
    "image",
    "submitted_at",
    "started_at",
    "ended_at",
    "pods",
]


class WorkloadSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """What every workload shows; ``gpu`` is GPUs per replica."""

    # The submit services' limits (jobs.services.workloads), for the OpenAPI document.
    schema_ranges: ClassVar[dict[str, tuple[int, int]]] = {
        "priority": (1, 9),
        "replicas": (1, INT32),
    }

    workspace = ref(read_only=True)
    quota = ref(read_only=True)
    owner = ref("username", read_only=True)
    node_pools = ref(many=True, read_only=True)
    gpu = ReplicaGPUField(read_only=True)
    pods = PodSerializer(many=True, read_only=True)

    class Meta:
        model = Workload
        fields = COMMON
        read_only_fields = fields


class JobSerializer(WorkloadSerializer):
    """A training job."""

    class Meta(WorkloadSerializer.Meta):
        fields = [
            *COMMON,
            "idle_policy",
            "progress",
            "total_work",
            "checkpoint_interval",
            "fault_tolerance",
            "max_restarts",
            "failures",
            "hang_minutes",
            "checkpoint_label",
            "last_checkpoint_at",
            "failure_policy",
            "retry_exit_codes",
            "retry_messages",
            "fail_exit_codes",
            "fail_messages",
        ]
        read_only_fields = fields


class ServiceSerializer(WorkloadSerializer):
    """An inference service; ``replicas`` is its target."""

    schema_ranges = {**WorkloadSerializer.schema_ranges, "replicas": (0, INT32)}

    class Meta(WorkloadSerializer.Meta):
        fields = [*COMMON, "min_replicas", "max_replicas"]
        read_only_fields = fields


class InstanceSerializer(WorkloadSerializer):
    """An interactive instance with its time limits."""

    class Meta(WorkloadSerializer.Meta):
        fields = [*COMMON, "max_duration", "idle_stop_minutes", "last_activity_at"]
        read_only_fields = fields


def with_events(base: type[WorkloadSerializer]) -> type[WorkloadSerializer]:
    """The detail variant of a workload serializer: its event timeline too."""

    class Detail(base):  # type: ignore[valid-type,misc]
        events = EventSerializer(many=True, read_only=True)

        class Meta(base.Meta):  # type: ignore[name-defined,misc]
            fields = [*base.Meta.fields, "events"]
            read_only_fields = fields

    Detail.__name__ = Detail.__qualname__ = base.__name__.replace("Serializer", "DetailSerializer")
    Detail.__doc__ = f"{(base.__doc__ or '').strip()} With its event timeline."
    return Detail


JobDetailSerializer = with_events(JobSerializer)
ServiceDetailSerializer = with_events(ServiceSerializer)
InstanceDetailSerializer = with_events(InstanceSerializer)


def _workspace_named(shape: tuple[str, ...], name: str) -> Any:
    """The workspace called `name` (``shape``: its columns)."""
    return Workspace.objects.filter(name=name).values(*shape)


def _pools_of(shape: tuple[str, ...], resource_pool_id: int) -> Any:
    """A resource pool's node pools by name (``shape``: their columns)."""
    return (
        NodePool.objects.filter(resource_pool_id=resource_pool_id).order_by("name").values(*shape)
    )


# Submits read these in their write transaction: compiled once, they hold the lock less.
_WORKSPACE_NAMED = Statement(_workspace_named)
_POOLS_OF = Statement(_pools_of)


@extend_schema_field(OpenApiTypes.STR)
class _VisibleWorkspaceField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """A workspace by name, among those the user may see (others do not exist for them)."""

    default_error_messages = {
        **serializers.SlugRelatedField.default_error_messages,
        **missing_named("workspace"),
    }

    def get_queryset(self) -> Any:
        return Workspace.objects.all()

    def to_internal_value(self, data: Any) -> Workspace:
        """The named workspace if the context's ``access`` sees it, else "does not exist"."""
        if isinstance(data, str):
            rows = _WORKSPACE_NAMED.rows(data, shape=columns(Workspace))
            found = loaded(Workspace, rows)
            if not found:
                self.fail("does_not_exist", slug_name=self.slug_field, value=data)
            workspace = found[0]
        else:  # DRF's own answer to a number or a list
            workspace = super().to_internal_value(data)
        access: Access = self.context["access"]
        if not access.has_perm(VIEW, workspace):
            self.fail("does_not_exist", slug_name=self.slug_field, value=str(data))
        return workspace


class SubmitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """What every workload asks for: replicas × (GPUs, millicores, MiB) in a quota.

    The context carries the user's ``access`` (workspaces.access.Access). Whether they may
    submit, and use the quota, is the service's to decide.
    """

    schema_ranges: ClassVar[dict[str, tuple[int, int]]] = {
        "priority": (1, 9),
        "replicas": (1, INT32),
    }

    workspace = _VisibleWorkspaceField(slug_field="name")
    quota = serializers.CharField(
        required=False, help_text="Defaults to the only quota your role may use here."
    )
    name = serializers.CharField(
        max_length=63, trim_whitespace=False, validators=[names.workload_name]
    )
    replicas = whole(default=1)
    gpu = ReplicaGPUField(help_text="GPUs per replica (below 1 shares a GPU).")
    cpu = whole(default=0, help_text="millicores per replica")
    memory = whole(default=0, help_text="MiB per replica")
    priority = whole(default=5, help_text="1 (lowest) to 9 (highest)")
    node_pools = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Accepted node pools; defaults to every pool of the quota's resource pool "
        "that the quota allows.",
    )
    image = serializers.CharField(max_length=300, required=False, default="", allow_blank=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Resolve the quota among the workspace's and the node pools among the quota's."""
        workspace: Workspace = attrs["workspace"]
        name = attrs.get("quota")
        if name:
            quota = Quota.objects.filter(bindings__workspace=workspace, name=name).first()
            if quota is None:
                raise serializers.ValidationError(
                    {"quota": [f"No quota named {name!r} in {workspace.name}."]}
                )
        else:
            usable = self.context["access"].usable_quotas(workspace)
            if len(usable) != 1:  # the service refuses it (403 first for who may not submit)
                attrs.update(quota=None, node_pools=[])
                return attrs
            quota = usable[0].quota
        attrs["quota"] = quota
        rows = _POOLS_OF.rows(quota.resource_pool_id, shape=columns(NodePool))
        pools = loaded(NodePool, rows)
        wanted = attrs.get("node_pools")
        if wanted:
            found = {np.name: np for np in pools}
            missing = [n for n in wanted if n not in found]
            if missing:
                raise serializers.ValidationError(
                    {"node_pools": [f"No node pool named {missing[0]!r} for {quota.name}."]}
                )
            attrs["node_pools"] = [found[n] for n in wanted]
        else:
            allowed = quota_pools_in_effect(quota)
            attrs["node_pools"] = [np for np in pools if allowed is None or np.pk in allowed]
        return attrs

    def service_kwargs(self) -> dict[str, Any]:
        """The keyword arguments every submit service takes (without the actor)."""
        data = dict(self.validated_data)
        shape = Shape(
            replicas=data.pop("replicas"),
            gpu=data.pop("gpu"),
            cpu=data.pop("cpu"),
            memory=data.pop("memory"),
            priority=data.pop("priority"),
        )
        return {"shape": shape, **data}


def _codes(help_text: str) -> serializers.ListField:
    """An ExitCodeAndErrorMsg list of exit codes (the service checks their range)."""
    return serializers.ListField(
        child=serializers.IntegerField(), required=False, default=list, help_text=help_text
    )


def _patterns(help_text: str) -> serializers.ListField:
    """An ExitCodeAndErrorMsg list of message patterns (the service checks each compiles)."""
    return serializers.ListField(
        child=serializers.CharField(trim_whitespace=False),
        required=False,
        default=list,
        help_text=help_text,
    )


class JobSubmitSerializer(SubmitSerializer):
    """A training job: idle policy, checkpoints and fault tolerance."""

    idle_policy = serializers.ChoiceField(choices=IdlePolicy.choices, default=IdlePolicy.NONE)
    checkpoint_interval = whole(default=1800, help_text="seconds")
    total_work = FiniteFloatField(
        required=False, help_text="GPU-seconds (default: one hour on all its GPUs)"
    )
    fault_tolerance = serializers.BooleanField(default=True)
    max_restarts = whole(default=3, max_value=32767)
    restart_on_failure = serializers.BooleanField(default=True)
    restart_on_preemption = serializers.BooleanField(default=True)
    restart_on_node_loss = serializers.BooleanField(default=True)
    restart_mode = serializers.ChoiceField(choices=RestartMode.choices, default=RestartMode.SYNC)
    hang_minutes = whole(required=False, allow_null=True)
    failure_policy = serializers.ChoiceField(
        choices=FailurePolicy.choices,
        default=FailurePolicy.ANY,
        help_text="ExitCodeAndErrorMsg: retry only the listed exit codes and messages.",
    )
    retry_exit_codes = _codes("Exit codes (1-255) that are retried, within max_restarts.")
    retry_messages = _patterns("Termination-message patterns (regular expressions) retried.")
    fail_exit_codes = _codes("Exit codes that fail the job at once.")
    fail_messages = _patterns("Termination-message patterns that fail the job at once.")
    command = serializers.CharField(required=False, default="", allow_blank=True)


class ServiceCreateSerializer(SubmitSerializer):
    """An inference service: ``replicas`` is the first target within min..max."""

    schema_ranges = {**SubmitSerializer.schema_ranges, "replicas": (0, INT32)}

    min_replicas = whole(default=1)
    max_replicas = whole(required=False, help_text="Defaults to replicas.")
    command = serializers.CharField(required=False, default="", allow_blank=True)


class InstanceStartSerializer(SubmitSerializer):
    """An interactive instance: stopped after max_duration seconds (or idle_stop minutes)."""

    max_duration = whole(
        required=False,
        allow_null=True,
        help_text="seconds; omitted or null: the workspace's default. At most the "
        "workspace's instance_max_duration.",
    )
    idle_stop_minutes = whole(required=False, allow_null=True)


class ServiceScaleSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A new target replica count."""

    replicas = whole()


class ScalingRuleSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A scheduled scaling rule: at each cron time (in its time zone) set the target."""

    name = serializers.CharField(max_length=63, trim_whitespace=False, validators=[names.rule_name])
    cron = serializers.CharField(max_length=100)
    timezone = serializers.CharField(max_length=64, default="UTC")
    target_replicas = whole()
    exclude_cron = serializers.CharField(
        max_length=100, required=False, default="", allow_blank=True
    )
    enabled = serializers.BooleanField(default=True)

    class Meta:
        model = ScalingRule
        fields = [
            "id",
            "name",
            "cron",
            "timezone",
            "target_replicas",
            "exclude_cron",
            "enabled",
            "created_at",
            "last_fired_at",
            "last_run_at",
            "last_run_result",
        ]
        read_only_fields = ["id", "created_at", "last_fired_at", "last_run_at", "last_run_result"]


class UsageSampleSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A quota's usage at one minute, in GPUs."""

    quota = ref(read_only=True)
    gpu_in_quota = GPUField(read_only=True)
    gpu_borrowed = GPUField(read_only=True)
    gpu_pending = GPUField(read_only=True)

    class Meta:
        model = UsageSample
        fields = ["at", "quota", "gpu_in_quota", "gpu_borrowed", "gpu_pending", "preemptions"]
        read_only_fields = fields


class UsageQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Query parameters of the usage time series."""

    quota = serializers.CharField(required=False, help_text="Quota name or id.")
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)


class LogQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Query parameters of a replica's log."""

    replica = serializers.IntegerField(
        required=False, min_value=0, help_text="Replica index (default: the first current one)."
    )
    attempt = serializers.IntegerField(
        required=False, min_value=0, help_text="Attempt of that replica (default: the latest)."
    )
    tail = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_TAIL, default=DEFAULT_TAIL
    )
    since = serializers.DateTimeField(
        required=False, help_text="Only lines written after this time (the last answer's since)."
    )


class LogsSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A replica's recent log lines (jobs.pod_logs.ReplicaLogs)."""

    replica = serializers.IntegerField(allow_null=True)
    attempt = serializers.IntegerField(allow_null=True)
    pod = serializers.CharField()
    status = serializers.CharField()
    live = serializers.BooleanField(help_text="Its pod may still print: poll with since.")
    replicas = serializers.ListField(child=serializers.IntegerField())
    attempts = serializers.ListField(child=serializers.IntegerField())
    lines = serializers.ListField(child=serializers.CharField(trim_whitespace=False))
    notice = serializers.CharField(help_text="Why there are no lines, when there are none.")
    since = serializers.DateTimeField(allow_null=True)
