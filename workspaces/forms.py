"""Forms of the workspace pages: they turn input into typed values; the services decide."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.http import QueryDict

from console import names
from console.errors import DomainError
from console.numbers import INT32, NumberError, NumberField, parse_whole
from console.units import gpus_to_milli
from quotas.models import Quota
from workspaces.choices import Role
from workspaces.selectors import InstanceLimits
from workspaces.services import UsageRuleInput


class WorkspaceForm(forms.Form):
    """New workspace."""

    name = forms.CharField(
        max_length=100,
        strip=False,
        validators=[names.workspace_name],
        help_text="Letters, digits, - and _.",
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))


class MemberForm(forms.Form):
    """Add a member with a role, or change an existing member's role."""

    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.DEVELOPER)

    def clean_username(self) -> Any:
        """The user with that name."""
        username = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise forms.ValidationError(f"No user named {username!r}.")
        return user


class BindQuotaForm(forms.Form):
    """Bind one more quota to the workspace."""

    quota = forms.ModelChoiceField(queryset=Quota.objects.none(), empty_label=None)

    def __init__(self, *args: Any, quotas: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if quotas is not None:
            self.fields["quota"].queryset = quotas  # type: ignore[attr-defined]


@dataclass(frozen=True)
class RuleRow:
    """A Resource Usage row as typed, to show back when the save is refused."""

    quota_id: str
    role: str
    max_gpus: str
    max_priority: str


def rule_rows(data: QueryDict) -> list[RuleRow]:
    """The rows of the Resource Usage form in order, skipping rows left wholly empty."""
    columns = [data.getlist(k) for k in ("quota", "role", "max_gpus", "max_priority")]
    count = max((len(c) for c in columns), default=0)
    rows = []
    for i in range(count):
        values = [c[i].strip() if i < len(c) else "" for c in columns]
        if any(values):
            rows.append(RuleRow(*values))
    return rows


def parse_rule_rows(rows: list[RuleRow], quotas: Mapping[str, Quota]) -> list[UsageRuleInput]:
    """Turn typed rows into service input; max GPUs may be decimal (0.5) and is kept in milli."""
    rules = []
    for number, row in enumerate(rows, start=1):
        prefix = f"Rule {number}"
        quota = quotas.get(row.quota_id)
        if quota is None:
            raise DomainError(f"{prefix}: choose one of the workspace's quotas.", field="quota")
        if not row.role:
            raise DomainError(f"{prefix}: choose a role.", field="role")
        max_gpus = None
        if row.max_gpus:
            try:
                max_gpus = gpus_to_milli(row.max_gpus, field="max_gpus")
            except DomainError as exc:
                raise DomainError(f"{prefix}: max GPUs: {exc.message}", field="max_gpus") from None
        max_priority = None
        if row.max_priority:
            try:
                max_priority = parse_whole(row.max_priority)
            except NumberError:
                raise DomainError(
                    f"{prefix}: max priority {row.max_priority!r} is not a whole number 1-9.",
                    field="max_priority",
                ) from None
        rules.append(UsageRuleInput(quota, row.role, max_gpus, max_priority))
    return rules


def _hours(seconds: int | None) -> str:
    """Seconds as the hours the form shows: 7200 → "2", 5400 → "1.5"."""
    return "" if seconds is None else f"{Decimal(seconds) / 3600:.2f}".rstrip("0").rstrip(".")


class InstanceLimitsForm(forms.Form):
    """Scheduling Configuration → Time Limits: durations in hours; the service decides."""

    default_hours = NumberField(
        label="Default duration (hours)",
        min_value=Decimal(0),
        max_value=Decimal(INT32 // 3600),  # the limits are seconds in 32-bit columns
        decimal_places=2,
        required=False,
        help_text="What an instance gets when its owner gives no duration. "
        "Empty: owners must give one.",
    )
    max_hours = NumberField(
        label="Maximum duration (hours)",
        min_value=Decimal(0),
        max_value=Decimal(INT32 // 3600),
        decimal_places=2,
        required=False,
        help_text="The longest an instance may run. Lowering it shortens running instances "
        "above it. Empty: no cap.",
    )

    ALIASES = {"instance_default_duration": "default_hours", "instance_max_duration": "max_hours"}

    @classmethod
    def of(cls, limits: InstanceLimits) -> InstanceLimitsForm:
        """The form showing the saved limits."""
        return cls(
            initial={"default_hours": _hours(limits.default), "max_hours": _hours(limits.maximum)}
        )

    def seconds(self) -> tuple[int | None, int | None]:
        """(default, maximum) in seconds, None where left empty."""
        default, maximum = (
            self.cleaned_data.get("default_hours"),
            self.cleaned_data.get("max_hours"),
        )
        # Two decimal places of an hour are whole seconds (0.01 h = 36 s).
        return (
            None if default is None else int(default * 3600),
            None if maximum is None else int(maximum * 3600),
        )
