"""Serializers of the workspace API: members, bound quotas, Resource Usage rules."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console import names
from console.api import GPUField, missing_named, ref, whole
from quotas.models import Quota
from workspaces.choices import Role
from workspaces.models import Membership, ResourceUsageRule, Workspace, WorkspaceQuota


class MemberSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A member and their role."""

    user = ref("username", queryset=get_user_model().objects.all())
    role = serializers.ChoiceField(choices=Role.choices)

    class Meta:
        model = Membership
        fields = ["user", "role"]


class MemberRoleSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A member's new role."""

    role = serializers.ChoiceField(choices=Role.choices)


@extend_schema_field(OpenApiTypes.STR)
class _BoundQuotaField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """A quota by name, among those bound to the workspace of the request."""

    default_error_messages = {
        **serializers.SlugRelatedField.default_error_messages,
        **missing_named("quota", " bound to this workspace"),
    }

    def get_queryset(self) -> Any:
        workspace = self.context.get("workspace")
        return Quota.objects.filter(bindings__workspace=workspace)


class UsageRuleSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """Which role may use a bound quota, with optional caps (the strictest wins)."""

    schema_ranges = {"max_priority": (1, 9)}  # workspaces.services checks it

    quota = _BoundQuotaField(slug_field="name")
    role = serializers.ChoiceField(choices=Role.choices)
    max_gpus = GPUField(required=False, allow_null=True, help_text="GPUs; null is no cap.")
    max_priority = whole(required=False, allow_null=True)

    class Meta:
        model = ResourceUsageRule
        fields = ["id", "quota", "role", "max_gpus", "max_priority"]


class UsageRuleCapsSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """New caps of a rule."""

    schema_ranges = {"max_priority": (1, 9)}  # workspaces.services checks it

    max_gpus = GPUField(required=False, allow_null=True, help_text="GPUs; null is no cap.")
    max_priority = whole(required=False, allow_null=True)


class BindingSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A quota the workspace may submit to."""

    quota = ref(queryset=Quota.objects.all())
    quota_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = WorkspaceQuota
        fields = ["quota", "quota_id"]


class WorkspaceSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A team's workspace with its members, bound quotas and Resource Usage rules."""

    name = serializers.CharField(
        max_length=100, trim_whitespace=False, validators=[names.workspace_name]
    )
    description = serializers.CharField(required=False, allow_blank=True, default="")
    members = MemberSerializer(source="memberships", many=True, read_only=True)
    quotas = ref(many=True, read_only=True)
    resource_usage = UsageRuleSerializer(source="usage_rules", many=True, read_only=True)
    instance_default_duration = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="Seconds an interactive instance gets when it asks for none; null: no default.",
    )
    instance_max_duration = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The longest an interactive instance may run, in seconds; null: no cap.",
    )

    class Meta:
        model = Workspace
        fields = [
            "id",
            "name",
            "description",
            "created_at",
            "members",
            "quotas",
            "resource_usage",
            "instance_default_duration",
            "instance_max_duration",
        ]
        read_only_fields = ["id", "created_at"]


class InstanceLimitsSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """New interactive time limits, in seconds; an omitted one is kept, null removes it."""

    instance_default_duration = whole(
        required=False, allow_null=True, help_text="seconds; null: no default."
    )
    instance_max_duration = whole(
        required=False,
        allow_null=True,
        help_text="seconds; null: no cap. Lowering it lowers the limit of the active "
        "instances above it.",
    )
