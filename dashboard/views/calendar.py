"""The quota calendar pages (platform admins): the rules cluster-wide or of one quota, add,
edit (with the rule's blast radius now and a what-if link) and delete. Their URLs join the
quotas namespace (console/urls.py); they live here because the blast radius reads workloads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views import View
from django.views.generic import FormView, TemplateView

from console import clock
from console.confirm import Confirmation, confirm_or_apply
from console.cron import describe
from console.errors import DomainError
from console.permissions import PlatformAdminRequiredMixin
from dashboard.selectors.calendar import calendar_blast_radius, what_if_url
from quotas.calendar_forms import CalendarRuleForm
from quotas.models import CalendarRule, Quota
from quotas.services.calendar import (
    action_words,
    calendar_rule_create,
    calendar_rule_delete,
    calendar_rule_update,
    next_firing,
)

if TYPE_CHECKING:
    RuleFormView = FormView[CalendarRuleForm]
else:  # FormView is generic only in the stubs
    RuleFormView = FormView

RULES = CalendarRule.objects.select_related("quota", "target", "node_pool")


class CalendarListView(PlatformAdminRequiredMixin, TemplateView):
    """The calendar rules, cluster-wide or of one quota (as source or target)."""

    template_name = "quotas/calendar_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Each rule with its schedule in words and its next firing (2 queries)."""
        context = super().get_context_data(**kwargs)
        rules = RULES.order_by("name")
        quota = None
        if "pk" in self.kwargs:
            quota = get_object_or_404(Quota, pk=self.kwargs["pk"])
            rules = rules.filter(Q(quota=quota) | Q(target=quota))
        now = clock.now()
        context["quota"] = quota
        context["rows"] = [
            {
                "rule": rule,
                "action": action_words(rule),
                "schedule": describe(rule.cron),
                "next": next_firing(rule, now),
            }
            for rule in rules
        ]
        return context


class CalendarRuleCreateView(PlatformAdminRequiredMixin, RuleFormView):
    """Add a calendar rule; then its page shows what it would do if it fired now."""

    template_name = "quotas/calendar_form.html"
    form_class = CalendarRuleForm

    def get_initial(self) -> dict[str, Any]:
        """?quota=<id> picks the quota."""
        initial = super().get_initial()
        quota = self.request.GET.get("quota", "")
        if quota.isdigit():
            initial["quota"] = int(quota)
        initial["enabled"] = True
        return initial

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The title and button."""
        context = super().get_context_data(**kwargs)
        context["title"] = "New calendar rule"
        context["submit_label"] = "Create rule"
        return context

    def form_valid(self, form: CalendarRuleForm) -> HttpResponse:
        """Create, or show the service's refusal on its field."""
        try:
            rule = calendar_rule_create(now=clock.now(), **form.service_kwargs())
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        messages.success(self.request, f"Created calendar rule {rule.name}.")
        return redirect("quotas:calendar_rule", pk=rule.pk)


class CalendarRuleView(PlatformAdminRequiredMixin, RuleFormView):
    """A rule: edit it, see its last run, its blast radius now and a what-if of last week."""

    template_name = "quotas/calendar_form.html"
    form_class = CalendarRuleForm
    kwargs: dict[str, Any]
    _rule: CalendarRule | None = None

    def get_rule(self) -> CalendarRule:
        """The URL's rule, loaded after the permission check (404 if there is none)."""
        if self._rule is None:
            self._rule = get_object_or_404(RULES, pk=self.kwargs["pk"])
        return self._rule

    def get_initial(self) -> dict[str, Any]:
        """The rule's values."""
        return CalendarRuleForm.initial_for(self.get_rule())

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The rule, its blast radius now and the what-if link."""
        context = super().get_context_data(**kwargs)
        rule = self.get_rule()
        now = clock.now()
        context.update(
            rule=rule,
            title=f"Calendar rule {rule.name}",
            submit_label="Save",
            action=action_words(rule),
            schedule=describe(rule.cron),
            next=next_firing(rule, now),
            blast=calendar_blast_radius(rule, now=now),
            what_if=what_if_url(rule),
        )
        return context

    def form_valid(self, form: CalendarRuleForm) -> HttpResponse:
        """Save, or show the service's refusal on its field."""
        try:
            rule = calendar_rule_update(
                rule=self.get_rule(), now=clock.now(), **form.service_kwargs()
            )
        except DomainError as err:
            form.add_service_error(err)
            return self.form_invalid(form)
        messages.success(self.request, f"Saved calendar rule {rule.name}.")
        return redirect("quotas:calendar_rule", pk=rule.pk)


class CalendarRuleDeleteView(PlatformAdminRequiredMixin, View):
    """Delete a rule and its beat task, once confirmed (console.confirm)."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """The confirmation page, then the delete."""
        rule = get_object_or_404(RULES, pk=kwargs["pk"])
        confirmation = Confirmation(
            title=f"Delete calendar rule {rule.name}",
            effects=[
                f"It will no longer {action_words(rule)} at {describe(rule.cron)} "
                f"({rule.timezone}).",
                "Quotas keep the guarantees they have now.",
            ],
            action="Delete rule",
            back=reverse("quotas:calendar_rule", args=[rule.pk]),
            facts=f"{rule.pk}",
        )
        page = confirm_or_apply(request, confirmation)
        if page is not None:
            return page
        calendar_rule_delete(rule=rule)
        messages.success(request, f"Deleted calendar rule {rule.name}.")
        return redirect("quotas:calendar")
