"""Serializers of the quota and node API: they parse and shape; the services decide.

GPUs travel as decimal numbers (0.5 is GPU sharing), CPU as millicores and memory as MiB.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from cluster.models import NodePool, ResourcePool
from console import names
from console.api import FiniteFloatField, GPUField, ref, whole
from quotas.amounts import Amounts
from quotas.choices import QueueStrategy
from quotas.models import CalendarRule, Quota, QuotaAudit
from quotas.selectors import audit_changes

AMOUNT_KEYS = tuple(f"{b}_{r}" for b in ("min", "max") for r in ("gpu", "cpu", "memory"))


def by_name(queryset: Any, **kwargs: Any) -> Any:
    """A reference to a named row (quota, node pool, resource pool) by its name."""
    return ref("name", queryset=queryset, **kwargs)


# Quotas -----------------------------------------------------------------------------------------


class MinSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Guaranteed amounts on one node pool; an omitted one keeps its value."""

    gpu = GPUField(source="min_gpu", required=False)
    cpu = whole(big=True, source="min_cpu", required=False, help_text="millicores")
    memory = whole(big=True, source="min_memory", required=False, help_text="MiB")


class MaxSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Limits on one node pool; null is no limit, an omitted one keeps its value."""

    gpu = GPUField(source="max_gpu", required=False, allow_null=True)
    cpu = whole(big=True, source="max_cpu", required=False, allow_null=True)
    memory = whole(big=True, source="max_memory", required=False, allow_null=True)


class QuotaResourceSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A quota's min and max on one node pool."""

    node_pool = by_name(NodePool.objects.all())
    min = MinSerializer(source="*", required=False)
    max = MaxSerializer(source="*", required=False)


class UsageSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Live GPUs of the quota's subtree: a workload counts against its quota and every ancestor."""

    in_quota = GPUField(source="usage_in_quota", read_only=True, default=0)
    borrowed = GPUField(source="usage_borrowed", read_only=True, default=0)
    pending = GPUField(source="usage_pending", read_only=True, default=0)


class QuotaSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A quota of the tree: its parent, settings, amounts per node pool and live usage."""

    resource_pool = ref(read_only=True)
    parent = ref(read_only=True, allow_null=True)
    allowed_node_pools = ref(
        many=True,
        read_only=True,
        help_text="The only node pools its workloads (and its descendants') run in; empty: "
        "every pool its parent allows.",
    )
    resources = QuotaResourceSerializer(many=True, read_only=True)
    usage = UsageSerializer(source="*", read_only=True)

    class Meta:
        model = Quota
        fields = [
            "id",
            "name",
            "resource_pool",
            "parent",
            "child_preemption",
            "lend_idle",
            "over_quota_weight",
            "queue_strategy",
            "allowed_node_pools",
            "version",
            "created_at",
            "resources",
            "usage",
        ]
        read_only_fields = fields


class QuotaTreeSerializer(QuotaSerializer):
    """A quota with its children nested (``?view=tree``)."""

    # The list answers plain quotas unless ?view=tree (the schema's one shape for both).
    schema_optional = ("children",)

    children = serializers.SerializerMethodField(help_text="Only with ?view=tree.")

    class Meta(QuotaSerializer.Meta):
        fields = [*QuotaSerializer.Meta.fields, "children"]
        read_only_fields = fields

    @extend_schema_field({"type": "array", "items": {"type": "object"}})
    def get_children(self, quota: Quota) -> list[dict[str, Any]]:
        """The children, each with its own children."""
        kids = self.context["children"].get(quota.pk, [])
        return [QuotaTreeSerializer(kid, context=self.context).data for kid in kids]


class QuotaCreateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A root quota (no parent) or a child-level quota."""

    name = serializers.CharField(
        max_length=100, trim_whitespace=False, validators=[names.quota_name]
    )
    resource_pool = by_name(
        ResourcePool.objects.all(), required=False, help_text="Defaults to the parent's."
    )
    parent = by_name(Quota.objects.all(), required=False, allow_null=True)
    resources = QuotaResourceSerializer(many=True, required=False)
    child_preemption = serializers.BooleanField(default=False)
    lend_idle = serializers.BooleanField(default=True)
    over_quota_weight = FiniteFloatField(required=False, allow_null=True)
    queue_strategy = serializers.ChoiceField(
        choices=QueueStrategy.choices, default=QueueStrategy.PRIORITY
    )
    allowed_node_pools = by_name(
        NodePool.objects.all(),
        many=True,
        required=False,
        help_text="Restrict its workloads to these node pools; empty: every pool its parent "
        "allows.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A root quota names its resource pool; a child takes its parent's."""
        parent = attrs.get("parent")
        if attrs.get("resource_pool") is None:
            if parent is None:
                raise serializers.ValidationError(
                    {"resource_pool": ["A root quota needs a resource pool."]}
                )
            attrs["resource_pool"] = parent.resource_pool
        return attrs


class QuotaUpdateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Settings of a quota (its amounts change through scale)."""

    name = serializers.CharField(
        max_length=100, required=False, trim_whitespace=False, validators=[names.quota_name]
    )
    over_quota_weight = FiniteFloatField(required=False, allow_null=True)
    lend_idle = serializers.BooleanField(required=False)
    queue_strategy = serializers.ChoiceField(choices=QueueStrategy.choices, required=False)
    child_preemption = serializers.BooleanField(required=False)
    allowed_node_pools = by_name(
        NodePool.objects.all(),
        many=True,
        required=False,
        help_text="Restrict its workloads to these node pools; [] lifts its own restriction.",
    )
    version = whole(required=False, help_text="Alternative to If-Match: the version you edited.")


class ScaleSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """New min and max per node pool; what is left out keeps its value."""

    resources = QuotaResourceSerializer(many=True, allow_empty=False)
    version = whole(required=False, help_text="Alternative to If-Match: the version you edited.")


class ScaleResultSerializer(QuotaSerializer):
    """The quota after a scale, and whether the scale changed it (a scale to the amounts it
    has changes nothing: no new version, no audit record)."""

    changed = serializers.BooleanField(read_only=True)

    class Meta(QuotaSerializer.Meta):
        fields = [*QuotaSerializer.Meta.fields, "changed"]
        read_only_fields = fields


class RebalanceSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Move guaranteed amounts from one quota to a sibling."""

    locals()["from"] = by_name(Quota.objects.all(), help_text="The quota that gives.")
    to = by_name(Quota.objects.all(), help_text="The sibling that takes.")
    node_pool = by_name(
        NodePool.objects.all(), required=False, help_text="Needed when the pool has several."
    )
    gpu = GPUField(required=False, default=0)
    cpu = whole(big=True, default=0, help_text="millicores")
    memory = whole(big=True, default=0, help_text="MiB")


class RebalanceResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Both quotas after the move."""

    source = QuotaSerializer()  # type: ignore[assignment]
    target = QuotaSerializer()


class AffectedWorkloadSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A running workload whose label a scale would change."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    workspace = serializers.CharField(source="workspace.name")
    quota = serializers.CharField(source="quota.name")
    priority = serializers.IntegerField()
    gpu = GPUField(source="total_gpu")


class ScalePreviewSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Which running workloads a scale would move out of (or into) quota."""

    not_in_quota = AffectedWorkloadSerializer(
        many=True, help_text="Running workloads now In Quota that would become Not in Quota."
    )
    in_quota = AffectedWorkloadSerializer(
        many=True, help_text="Borrowing workloads that would become In Quota."
    )


class QuotaAuditSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """One audit record: who, when, what, before and after."""

    actor = ref("username", read_only=True, allow_null=True)
    changes = serializers.SerializerMethodField()

    class Meta:
        model = QuotaAudit
        fields = ["id", "at", "action", "quota_name", "actor", "changes", "before", "after"]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_changes(self, record: QuotaAudit) -> list[str]:
        """The change line by line, as the Overview page shows it."""
        return audit_changes(record)


def merged_amounts(
    current: dict[int, Amounts], rows: list[dict[str, Any]]
) -> dict[NodePool, Amounts]:
    """Each given node pool's amounts: what the request names over what the quota has."""
    result: dict[NodePool, Amounts] = {}
    for row in rows:
        node_pool: NodePool = row["node_pool"]
        base = result.get(node_pool) or current.get(node_pool.pk, Amounts())
        values = {key: getattr(base, key) for key in AMOUNT_KEYS}
        values.update({key: row[key] for key in AMOUNT_KEYS if key in row})
        result[node_pool] = Amounts(**values)
    return result


# Quota calendar ---------------------------------------------------------------------------------


class CalendarRuleSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A scheduled quota change: at each cron time in its zone, except on its exclude-dates,
    move GPUs of guarantee to a sibling (rebalance), scale a quota, or set its lend-idle."""

    name = serializers.CharField(max_length=100, trim_whitespace=False)
    cron = serializers.CharField(max_length=100)
    timezone = serializers.CharField(max_length=64, default="UTC")
    exclude_dates = serializers.ListField(
        child=serializers.CharField(), required=False, default=list, help_text="YYYY-MM-DD"
    )
    enabled = serializers.BooleanField(default=True)
    quota = by_name(Quota.objects.all(), help_text="The quota it changes (for a move, the giver).")
    to = by_name(
        Quota.objects.all(),
        source="target",
        required=False,
        allow_null=True,
        help_text="rebalance: the sibling that takes the GPUs.",
    )
    node_pool = by_name(
        NodePool.objects.all(),
        required=False,
        allow_null=True,
        help_text="rebalance and scale: needed when the pool has several.",
    )
    gpus = whole(required=False, allow_null=True, help_text="Whole GPUs moved, or scaled to.")
    lend_idle = serializers.BooleanField(required=False, allow_null=True, default=None)

    class Meta:
        model = CalendarRule
        fields = [
            "id",
            "name",
            "action",
            "quota",
            "to",
            "node_pool",
            "gpus",
            "lend_idle",
            "cron",
            "timezone",
            "exclude_dates",
            "enabled",
            "created_at",
            "last_fired_at",
            "last_run_at",
            "last_outcome",
            "last_run_result",
        ]
        read_only_fields = [
            "id",
            "created_at",
            "last_fired_at",
            "last_run_at",
            "last_outcome",
            "last_run_result",
        ]
