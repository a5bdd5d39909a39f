"""Workspace API: a user sees only the workspaces they are in (others answer 404)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response

from console.api import WorkspaceScopedViewSet
from workspaces.api import serializers as s
from workspaces.models import Membership, ResourceUsageRule, Workspace, WorkspaceQuota
from workspaces.roles import MANAGE
from workspaces.services import (
    KEEP,
    UsageRuleInput,
    resource_usage_rule_set,
    resource_usage_rules_save,
    workspace_create,
    workspace_instance_limits_set,
    workspace_member_add,
    workspace_member_remove,
    workspace_quota_bind,
    workspace_quota_unbind,
)


class WorkspaceViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    WorkspaceScopedViewSet,
):
    """Workspaces; platform admins create them."""

    queryset = Workspace.objects.prefetch_related(
        Prefetch("memberships", queryset=Membership.objects.select_related("user")),
        "quotas",
        Prefetch("usage_rules", queryset=ResourceUsageRule.objects.select_related("quota")),
    ).order_by("name")
    serializer_class = s.WorkspaceSerializer
    noun = "workspace"
    workspace_path = ""
    admin_actions = frozenset({"create"})
    action_permissions = {"partial_update": MANAGE}
    filter_fields = {"name": "name"}

    def perform_create(self, serializer: Any) -> None:
        """workspace_create decides."""
        created = workspace_create(**serializer.validated_data)
        serializer.instance = self.get_queryset().get(pk=created.pk)

    @extend_schema(request=s.InstanceLimitsSerializer, responses=s.WorkspaceSerializer)
    def partial_update(self, request: Request, **kwargs: Any) -> Response:
        """Set the interactive time limits (manage); a lower maximum shortens active instances."""
        workspace = self.get_object()
        data = s.InstanceLimitsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        workspace_instance_limits_set(
            actor=request.user,
            workspace=workspace,
            default_duration=values.get("instance_default_duration", KEEP),
            max_duration=values.get("instance_max_duration", KEEP),
        )
        return Response(self.get_serializer(self.get_queryset().get(pk=workspace.pk)).data)


class _InWorkspace(WorkspaceScopedViewSet):
    """Rows under /workspaces/{workspace_id}/…; writes need manage on the workspace."""

    parent_kwarg = "workspace_id"
    parent_path = "workspace_id"
    parent_queryset = Workspace.objects.all()
    action_permissions = {"*": MANAGE}

    @property
    def workspace(self) -> Workspace:
        """The workspace of the URL, seen through the user's permissions."""
        workspace = self.parent_workspace()
        assert workspace is not None
        return workspace

    def get_serializer_context(self) -> dict[str, Any]:
        """Serializers resolve quotas among the workspace's."""
        context = dict(super().get_serializer_context())
        if self.kwargs.get("workspace_id") is not None:
            context["workspace"] = self.workspace
        return context


class MemberViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    _InWorkspace,
):
    """Members of a workspace by username; adding an existing member changes their role."""

    queryset = Membership.objects.select_related("user", "workspace").order_by("user__username")
    serializer_class = s.MemberSerializer
    noun = "member"
    lookup_field = "user__username"
    lookup_url_kwarg = "username"
    lookup_value_regex = r"[^/]+"

    def perform_create(self, serializer: Any) -> None:
        """workspace_member_add decides."""
        serializer.instance = workspace_member_add(
            workspace=self.workspace, **serializer.validated_data
        )

    @extend_schema(request=s.MemberRoleSerializer, responses=s.MemberSerializer)
    def partial_update(self, request: Request, **kwargs: Any) -> Response:
        """Change a member's role."""
        member = self.get_object()
        data = s.MemberRoleSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        member = workspace_member_add(
            workspace=self.workspace, user=member.user, role=data.validated_data["role"]
        )
        return Response(s.MemberSerializer(member).data)

    def perform_destroy(self, instance: Membership) -> None:
        """workspace_member_remove decides."""
        workspace_member_remove(workspace=self.workspace, user=instance.user)


class BindingViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    _InWorkspace,
):
    """Quotas bound to a workspace (by quota id); platform admins bind and unbind."""

    queryset = WorkspaceQuota.objects.select_related("quota", "workspace").order_by("quota__name")
    serializer_class = s.BindingSerializer
    noun = "bound quota"
    lookup_field = "quota_id"
    lookup_url_kwarg = "quota_id"
    admin_actions = frozenset({"create", "destroy"})

    def perform_create(self, serializer: Any) -> None:
        """workspace_quota_bind decides."""
        serializer.instance = workspace_quota_bind(
            workspace=self.workspace, quota=serializer.validated_data["quota"]
        )

    def perform_destroy(self, instance: WorkspaceQuota) -> None:
        """workspace_quota_unbind decides (it drops the quota's usage rules too)."""
        workspace_quota_unbind(workspace=self.workspace, quota=instance.quota)


class UsageRuleViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    _InWorkspace,
):
    """Resource Usage rules: which roles may use each bound quota, with caps."""

    queryset = ResourceUsageRule.objects.select_related("quota", "workspace").order_by(
        "quota__name", "role"
    )
    serializer_class = s.UsageRuleSerializer
    noun = "resource usage rule"

    def perform_create(self, serializer: Any) -> None:
        """resource_usage_rule_set decides (a second rule for a quota and role replaces it)."""
        serializer.instance = resource_usage_rule_set(
            workspace=self.workspace, **serializer.validated_data
        )

    @extend_schema(request=s.UsageRuleCapsSerializer, responses=s.UsageRuleSerializer)
    def partial_update(self, request: Request, **kwargs: Any) -> Response:
        """Change a rule's caps."""
        rule = self.get_object()
        data = s.UsageRuleCapsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        caps = {"max_gpus": rule.max_gpus, "max_priority": rule.max_priority}
        caps.update(data.validated_data)
        rule = resource_usage_rule_set(
            workspace=self.workspace, quota=rule.quota, role=rule.role, **caps
        )
        return Response(s.UsageRuleSerializer(rule, context=self.get_serializer_context()).data)

    def destroy(self, request: Request, **kwargs: Any) -> Response:
        """Drop a rule: the workspace's rules are saved again without it, all or nothing."""
        rule = self.get_object()
        others = ResourceUsageRule.objects.filter(workspace=self.workspace).exclude(pk=rule.pk)
        resource_usage_rules_save(
            workspace=self.workspace,
            rules=[
                UsageRuleInput(r.quota, r.role, r.max_gpus, r.max_priority)
                for r in others.select_related("quota")
            ],
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
