"""The quota calendar rule form: it parses what people type; quotas.services.calendar decides."""

from __future__ import annotations

from typing import Any

from django import forms

from cluster.models import NodePool
from console.errors import DomainError
from quotas.choices import CalendarAction
from quotas.models import CalendarRule, Quota

LEND_CHOICES = (("on", "On: lend its idle GPUs"), ("off", "Off: lend nothing"))


class CalendarRuleForm(forms.Form):
    """Name, schedule (cron, time zone, exclude-dates) and the action with its numbers."""

    name = forms.CharField(max_length=100)
    action = forms.ChoiceField(choices=CalendarAction.choices)
    quota = forms.ModelChoiceField(
        queryset=Quota.objects.order_by("name"),
        help_text="The quota it changes; for a move, the one that gives the GPUs.",
    )
    target = forms.ModelChoiceField(
        queryset=Quota.objects.order_by("name"),
        required=False,
        label="To sibling quota",
        help_text="Move only: the sibling that receives the GPUs.",
    )
    node_pool = forms.ModelChoiceField(
        queryset=NodePool.objects.order_by("name"),
        required=False,
        help_text="Move and scale: empty when the resource pool has one node pool.",
    )
    gpus = forms.IntegerField(
        required=False,
        min_value=0,
        label="GPUs",
        help_text="Move: how many GPUs of guarantee. Scale: the new guarantee.",
    )
    lend_idle = forms.ChoiceField(
        choices=(("", "—"), *LEND_CHOICES), required=False, label="Lend idle GPUs"
    )
    cron = forms.CharField(
        max_length=100, label="Cron", help_text="minute hour day-of-month month day-of-week"
    )
    timezone = forms.CharField(max_length=64, initial="UTC", label="Time zone")
    exclude_dates = forms.CharField(
        required=False,
        label="Exclude-dates",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Local dates it does not fire on, YYYY-MM-DD, separated by commas or spaces.",
    )
    enabled = forms.BooleanField(required=False, initial=True)

    @classmethod
    def initial_for(cls, rule: CalendarRule) -> dict[str, Any]:
        """The form's values for an existing rule."""
        lend = "" if rule.lend_idle is None else ("on" if rule.lend_idle else "off")
        return {
            "name": rule.name,
            "action": rule.action,
            "quota": rule.quota_id,
            "target": rule.target_id,
            "node_pool": rule.node_pool_id,
            "gpus": rule.gpus,
            "lend_idle": lend,
            "cron": rule.cron,
            "timezone": rule.timezone,
            "exclude_dates": ", ".join(rule.exclude_dates),
            "enabled": rule.enabled,
        }

    def service_kwargs(self) -> dict[str, Any]:
        """The service's keyword arguments; it checks them together."""
        data = self.cleaned_data
        lend = data.get("lend_idle") or ""
        return {
            "name": data["name"],
            "action": data["action"],
            "quota": data["quota"],
            "target": data.get("target"),
            "node_pool": data.get("node_pool"),
            "gpus": data.get("gpus"),
            "lend_idle": None if not lend else lend == "on",
            "cron": data["cron"],
            "timezone": data["timezone"],
            "exclude_dates": data.get("exclude_dates") or "",
            "enabled": bool(data.get("enabled")),
        }

    def add_service_error(self, err: DomainError) -> None:
        """Show a refused rule on the field it names."""
        self.add_error(err.field if err.field in self.fields else None, err.message)
