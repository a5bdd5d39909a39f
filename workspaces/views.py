"""Workspace pages: each user sees only the workspaces they belong to.

Access is decided once, in workspaces.pages.WorkspacePageMixin: a workspace the user cannot see
answers 404; one they can see but may not change answers 403; anonymous users go to login.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View
from django.views.generic import FormView, TemplateView

from console import clock
from console.confirm import confirm_or_apply
from console.errors import DomainError
from console.permissions import PlatformAdminRequiredMixin
from console.units import duration_text
from jobs.models import Workload
from quotas.models import Quota
from workspaces import effects, selectors
from workspaces.access import Access
from workspaces.choices import Role
from workspaces.forms import (
    BindQuotaForm,
    InstanceLimitsForm,
    MemberForm,
    RuleRow,
    WorkspaceForm,
    parse_rule_rows,
    rule_rows,
)
from workspaces.models import Membership
from workspaces.pages import WorkspacePageMixin
from workspaces.roles import MANAGE
from workspaces.services import (
    InstanceLimitsSaved,
    resource_usage_rules_save,
    workspace_create,
    workspace_instance_limits_set,
    workspace_member_add,
    workspace_member_remove,
    workspace_quota_bind,
    workspace_quota_unbind,
)


class WorkspaceListView(LoginRequiredMixin, TemplateView):
    """The workspaces the user may see."""

    template_name = "workspaces/list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Only visible workspaces."""
        context = super().get_context_data(**kwargs)
        access = Access(self.request.user)
        context["workspaces"] = access.workspaces().prefetch_related("quotas")
        context["can_create"] = access.platform_admin
        return context


class WorkspaceCreateView(PlatformAdminRequiredMixin, FormView):  # type: ignore[type-arg]
    """New workspace (platform admins)."""

    template_name = "workspaces/create.html"
    form_class = WorkspaceForm

    def form_valid(self, form: WorkspaceForm) -> HttpResponse:
        """Create it through the service."""
        try:
            workspace = workspace_create(**form.cleaned_data)
        except DomainError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            return self.form_invalid(form)
        messages.success(self.request, f"Workspace {workspace.name} created.")
        return redirect("workspaces:detail", name=workspace.name)


class _WorkspacePage(WorkspacePageMixin):
    """A workspace page: the URL names the workspace `name`."""

    workspace_kwarg = "name"


class WorkspaceDetailView(_WorkspacePage, TemplateView):
    """Overview: members and bound quotas."""

    template_name = "workspaces/detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Members, quotas, and the forms the user may use."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        context["tab"] = "overview"
        context["members"] = selectors.workspace_members(self.workspace)
        context["bound_quotas"] = selectors.workspace_quotas(self.workspace)
        context["roles"] = Role.choices
        context["member_form"] = MemberForm()
        unbound = Quota.objects.exclude(bindings__workspace=self.workspace).order_by("name")
        context["bind_form"] = BindQuotaForm(quotas=unbound)
        context["has_unbound"] = unbound.exists()
        return context


class WorkspaceMemberAddView(_WorkspacePage, View):
    """Add a member or change a member's role (workspace or platform admins)."""

    permission = MANAGE

    def post(self, request: HttpRequest, name: str) -> HttpResponse:
        """Add, then back to the overview with the outcome."""
        form = MemberForm(request.POST)
        if not form.is_valid():
            for field, errors in form.errors.items():
                # The field's label, never its code: notices speak to people.
                label = form.fields[field].label if field in form.fields else None
                text = " ".join(str(e) for e in errors)
                messages.error(request, f"{label}: {text}" if label else text)
            return redirect("workspaces:detail", name=name)
        try:
            membership = workspace_member_add(
                workspace=self.workspace,
                user=form.cleaned_data["username"],
                role=form.cleaned_data["role"],
            )
        except DomainError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request,
                f"{membership.user.username} is now {membership.get_role_display()} "
                f"of {self.workspace.name}.",
            )
        return redirect("workspaces:detail", name=name)


class WorkspaceMemberRemoveView(_WorkspacePage, View):
    """Remove a member and their permissions, once confirmed (console.confirm)."""

    permission = MANAGE
    tab = "overview"  # the confirmation page sits under this tab

    def post(self, request: HttpRequest, name: str, user_id: int) -> HttpResponse:
        """Confirm first (the access lost, the workloads that stay); remove, then back."""
        membership = get_object_or_404(
            Membership.objects.select_related("user"), workspace=self.workspace, user_id=user_id
        )
        member = membership.user
        confirmation = effects.member_remove(
            self.workspace, membership, actor=request.user, chrome=self.workspace_context()
        )
        if page := confirm_or_apply(request, confirmation):
            return page
        workspace_member_remove(workspace=self.workspace, user=member)
        messages.success(request, f"{member.username} removed from {self.workspace.name}.")
        if member.pk == request.user.pk:  # the workspace is out of their sight now
            return redirect("workspaces:list")
        return redirect("workspaces:detail", name=name)


class WorkspaceQuotaBindView(_WorkspacePage, View):
    """Bind a quota to the workspace (platform admins)."""

    platform_admin_only = True

    def post(self, request: HttpRequest, name: str) -> HttpResponse:
        """Bind, then back to the overview."""
        form = BindQuotaForm(request.POST, quotas=Quota.objects.all())
        if not form.is_valid():
            messages.error(request, "Choose a quota to bind.")
        else:
            quota = form.cleaned_data["quota"]
            workspace_quota_bind(workspace=self.workspace, quota=quota)
            messages.success(request, f"{quota.name} bound to {self.workspace.name}.")
        return redirect("workspaces:detail", name=name)


class WorkspaceQuotaUnbindView(_WorkspacePage, View):
    """Unbind a quota and drop its usage rules (platform admins), once confirmed."""

    platform_admin_only = True
    tab = "overview"  # the confirmation page sits under this tab

    def post(self, request: HttpRequest, name: str, quota_id: int) -> HttpResponse:
        """Confirm first (the submits refused, the workloads that stay); unbind, then back."""
        quota = get_object_or_404(Quota, pk=quota_id, bindings__workspace=self.workspace)
        confirmation = effects.quota_unbind(self.workspace, quota, chrome=self.workspace_context())
        if page := confirm_or_apply(request, confirmation):
            return page
        workspace_quota_unbind(workspace=self.workspace, quota=quota)
        messages.success(request, f"{quota.name} unbound from {self.workspace.name}.")
        return redirect("workspaces:detail", name=name)


class SchedulingConfigurationView(_WorkspacePage, View):
    """Scheduling Configuration opens on its Resource Usage tab."""

    def get(self, request: HttpRequest, name: str) -> HttpResponse:
        """Go to the first tab."""
        return redirect("workspaces:resource_usage", name=name)


class ResourceUsageView(_WorkspacePage, View):
    """Scheduling Configuration → Resource Usage: which roles may use each quota, with caps."""

    template_name = "workspaces/resource_usage.html"

    def get(self, request: HttpRequest, name: str) -> HttpResponse:
        """The saved rules; members without manage see them read-only."""
        rows = [
            RuleRow(
                quota_id=str(rule.quota_id),
                role=rule.role,
                max_gpus="" if rule.max_gpus is None else f"{rule.max_gpus / 1000:g}",
                max_priority="" if rule.max_priority is None else str(rule.max_priority),
            )
            for rule in selectors.workspace_usage_rules(self.workspace)
        ]
        return self.render(rows)

    def post(self, request: HttpRequest, name: str) -> HttpResponse:
        """Save every row in one transaction, or none with the reason."""
        self.access.require(MANAGE, self.workspace)
        rows = rule_rows(request.POST)
        quotas = {str(b.quota.pk): b.quota for b in selectors.workspace_quotas(self.workspace)}
        try:
            rules = parse_rule_rows(rows, quotas)
            saved = resource_usage_rules_save(workspace=self.workspace, rules=rules)
        except DomainError as exc:
            return self.render(rows, error=exc, status=400)
        messages.success(request, f"Resource usage saved: {len(saved)} rules.")
        return redirect("workspaces:resource_usage", name=name)

    def render(
        self, rows: list[RuleRow], *, error: DomainError | None = None, status: int = 200
    ) -> HttpResponse:
        """The tab with its rows (as saved, or as typed when refused)."""
        context = self.workspace_context()
        context.update(
            tab="scheduling",
            subtab="resource_usage",
            rows=rows,
            bound_quotas=selectors.workspace_quotas(self.workspace),
            roles=Role.choices,
            error=error,
        )
        return render(self.request, self.template_name, context, status=status)


class TimeLimitsView(_WorkspacePage, View):
    """Scheduling Configuration → Time Limits: the default and maximum duration of the
    workspace's interactive instances (Run:ai's interactive time limits)."""

    template_name = "workspaces/time_limits.html"

    def get(self, request: HttpRequest, name: str) -> HttpResponse:
        """The saved limits; members without manage see them read-only."""
        return self.render(InstanceLimitsForm.of(selectors.instance_limits(self.workspace)))

    def post(self, request: HttpRequest, name: str) -> HttpResponse:
        """Save both limits through the service, or neither with the reason on its field."""
        self.access.require(MANAGE, self.workspace)
        form = InstanceLimitsForm(request.POST)
        if form.is_valid():
            default, maximum = form.seconds()
            try:
                saved = workspace_instance_limits_set(
                    actor=request.user,
                    workspace=self.workspace,
                    default_duration=default,
                    max_duration=maximum,
                )
            except DomainError as exc:
                field = form.ALIASES.get(exc.field or "", exc.field)
                form.add_error(field if field in form.fields else None, exc.message)
            else:
                messages.success(request, _saved_message(saved))
                return redirect("workspaces:time_limits", name=name)
        return self.render(form, status=400)

    def render(self, form: InstanceLimitsForm, *, status: int = 200) -> HttpResponse:
        """The tab: the form (or the limits as text) and the active instances, with how long
        each has run (by the control loop's clock)."""
        now = clock.now()
        context = self.workspace_context()
        context.update(
            tab="scheduling",
            subtab="time_limits",
            form=form,
            limits=selectors.instance_limits(self.workspace),
            instances=[_InstanceRow.of(w, now) for w in selectors.active_instances(self.workspace)],
        )
        return render(self.request, self.template_name, context, status=status)


@dataclass(frozen=True)
class _InstanceRow:
    """An active instance on the Time Limits tab: how long it has run (None: not started)."""

    workload: Workload
    ran: int | None

    @classmethod
    def of(cls, workload: Workload, now: datetime) -> _InstanceRow:
        """The row at `now`."""
        started = workload.started_at
        return cls(workload, None if started is None else int((now - started).total_seconds()))

    @property
    def ran_text(self) -> str:
        """Time run so far to the minute ("1 h 5 min"), or "not started"."""
        if self.ran is None:
            return "not started"
        return duration_text(self.ran - self.ran % 60) if self.ran >= 60 else f"{self.ran} s"


def _saved_message(saved: InstanceLimitsSaved) -> str:
    """What the admin is told after saving: the limits, and the instances it shortened."""
    text = f"Time limits saved: {selectors.instance_limits(saved.workspace)}."
    count = len(saved.shortened)
    if count:
        names = ", ".join(w.name for w in saved.shortened[:5]) + (", …" if count > 5 else "")
        text += (
            f" {count} active instance{'' if count == 1 else 's'} now "
            f"{'has' if count == 1 else 'have'} the new maximum: {names}."
        )
    return text
