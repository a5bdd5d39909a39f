"""Workspaces isolate teams: members with roles, bound quotas and resource-usage rules."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from console import clock
from quotas.models import Quota
from workspaces.choices import Role


class Workspace(models.Model):
    """One team's space: its members see and manage only its jobs."""

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    quotas = models.ManyToManyField(Quota, through="WorkspaceQuota", related_name="workspaces")
    created_at = models.DateTimeField(default=clock.now, editable=False)
    # Interactive time limits (Run:ai): what an instance gets when it asks for no duration,
    # and the longest it may ask for. Empty: no default (it must ask) and no cap.
    instance_default_duration = models.PositiveIntegerField(
        null=True, blank=True, help_text="seconds"
    )
    instance_max_duration = models.PositiveIntegerField(null=True, blank=True, help_text="seconds")

    class Meta:
        ordering = ["name"]
        permissions = [
            ("submit_workspace", "Submit workloads in the workspace"),
            ("manage_workspace", "Manage the workspace's members and configuration"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(instance_default_duration__isnull=True)
                | Q(instance_max_duration__isnull=True)
                | Q(instance_default_duration__lte=F("instance_max_duration")),
                name="instance_default_within_max",
            )
        ]

    def __str__(self) -> str:
        return self.name


class WorkspaceQuota(models.Model):
    """A quota the workspace may submit to."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="bindings")
    quota = models.ForeignKey(Quota, on_delete=models.PROTECT, related_name="bindings")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "quota"], name="one_binding_per_quota")
        ]


class Membership(models.Model):
    """A user's role in a workspace; the role maps to object permissions on it."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices)

    class Meta:
        ordering = ["user__username"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="one_membership_per_user")
        ]


class ResourceUsageRule(models.Model):
    """Which role may use a bound quota, with optional caps; the strictest cap wins."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="usage_rules")
    quota = models.ForeignKey(Quota, on_delete=models.CASCADE, related_name="usage_rules")
    role = models.CharField(max_length=10, choices=Role.choices)
    max_gpus = models.PositiveBigIntegerField(null=True, blank=True, help_text="milli-GPU")
    max_priority = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["quota__name", "role"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "quota", "role"], name="one_rule_per_quota_role"
            )
        ]
