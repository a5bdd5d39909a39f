"""Forms of the workload pages: they turn input into typed values; the services decide.

Each submit form offers only the quotas the user's Resource Usage rules allow and shows their
caps; the service still checks every rule, and its refusal lands on the field it names.
"""

from __future__ import annotations

import functools
import zoneinfo
from decimal import ROUND_DOWN, Decimal
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q

from cluster.models import NodePool
from console import names
from console.numbers import INT32, NumberField, WholeNumberField
from console.units import MAX_GPUS, duration_text, milli_to_gpus
from jobs.choices import FailurePolicy, IdlePolicy, RestartMode
from jobs.models import ScalingRule
from quotas.models import Quota
from quotas.selectors import quotas_pools_in_effect
from workspaces.access import UsableQuota
from workspaces.selectors import InstanceLimits

NO_LIMITS = InstanceLimits(default=None, maximum=None)


def _quota_label(usable: UsableQuota, pools: dict[int, str] | None) -> str:
    """A quota as the submit form offers it, with the caps and node pools it holds you to."""
    caps = []
    if usable.max_gpus is not None:
        caps.append(f"at most {milli_to_gpus(usable.max_gpus)} GPUs")
    if usable.max_priority is not None:
        caps.append(f"priority up to {usable.max_priority}")
    if pools is not None:
        caps.append(f"only in {', '.join(sorted(pools.values()))}")
    return usable.quota.name + (f" ({', '.join(caps)})" if caps else "")


def _open_pools(usable: list[UsableQuota], allowed: dict[int, dict[int, str] | None]) -> Q:
    """The node pools at least one of the usable quotas lets its workloads run in."""
    everywhere = {u.quota.resource_pool_id for u in usable if allowed[u.quota.pk] is None}
    some = {pk for pools in allowed.values() if pools is not None for pk in pools}
    return Q(resource_pool_id__in=everywhere) | Q(pk__in=some)


def plain_error(name: str, field: forms.Field, error: ValidationError) -> str:
    """One of Django's field errors ("This field is required.", "Ensure this value is
    greater than or equal to 1.") in plain words that name the field."""
    label = str(field.label or name.replace("_", " ").capitalize())
    params = error.params or {}
    message = str(error.message % params if params else error.message)
    code = error.code
    stock = code == "required" or message.startswith("Select a valid choice")
    if stock and isinstance(field, forms.ModelChoiceField):
        return f"Choose a {label.lower()}" + (" from the list." if code != "required" else ".")
    if stock and isinstance(field, forms.ChoiceField):
        choices: Any = field.choices
        options = ", ".join(str(text) for value, text in choices if value != "")
        return f"{label}: choose one of {options}."
    if code == "required":
        return f"{label} is required."
    if code == "min_value":
        return f"{label} must be at least {params.get('limit_value')}."
    if code == "max_value":
        return f"{label} must be at most {params.get('limit_value')}."
    if code == "max_decimal_places":
        return f"{label} takes at most {params.get('max')} decimal places (like 0.125)."
    if code == "max_length":
        most = params.get("limit_value")
        return f"{label} has {params.get('show_value')} characters; at most {most} are allowed."
    if code == "invalid" and isinstance(field, forms.IntegerField) and message.startswith("Enter"):
        return f"{label} must be a whole number, like {field.initial or 1}."
    if code == "invalid" and message.startswith("Enter a number"):
        return f"{label} must be a number, like {field.initial or '0.5'}."
    if code == "invalid":
        return message  # console.numbers already says it plainly ("Too large: ...")
    return message


class WorkloadForm(forms.Form):
    """What every workload asks for: a name, a quota, a node pool and a replica shape.

    Django's field errors are put in plain words that name the field (plain_error).
    """

    name = forms.CharField(
        max_length=63,
        strip=False,
        validators=[names.workload_name],
        help_text="Lower-case letters, digits and -, like resnet50-0001.",
    )
    quota = forms.ModelChoiceField(
        queryset=Quota.objects.none(),
        empty_label=None,
        error_messages={"invalid_choice": "Your role may not use that quota in this workspace."},
    )
    node_pool = forms.ModelChoiceField(queryset=NodePool.objects.none(), empty_label=None)
    replicas = WholeNumberField(min_value=1, initial=1)
    # Each maximum is what the workload's 32-bit column holds in milli-GPUs, millicores, MiB.
    gpu = NumberField(
        label="GPUs per replica",
        min_value=Decimal(0),
        max_value=Decimal(MAX_GPUS),
        decimal_places=3,
        initial=1,
        help_text="Fractions below one GPU share a device (e.g. 0.5).",
    )
    cpu = NumberField(
        label="CPU cores per replica",
        min_value=Decimal(0),
        max_value=Decimal(INT32 // 1000),
        decimal_places=3,
        initial=8,
    )
    memory = NumberField(
        label="Memory per replica (GiB)",
        min_value=Decimal(0),
        max_value=Decimal(INT32 // 1024),
        decimal_places=3,
        initial=64,
    )
    priority = WholeNumberField(min_value=1, max_value=9, initial=5)

    def __init__(self, *args: Any, usable: list[UsableQuota], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.usable = {u.quota.pk: u for u in usable}
        self.no_quota = not usable
        quota_field: Any = self.fields["quota"]
        quota_field.queryset = Quota.objects.filter(pk__in=self.usable).order_by("name")
        allowed = quotas_pools_in_effect([u.quota for u in usable])
        quota_field.label_from_instance = lambda q: _quota_label(self.usable[q.pk], allowed[q.pk])
        pool_field: Any = self.fields["node_pool"]
        pool_field.queryset = NodePool.objects.filter(_open_pools(usable, allowed)).order_by("name")
        gpu_caps = [u.max_gpus for u in usable if u.max_gpus is not None]
        prio_caps = [u.max_priority for u in usable if u.max_priority is not None]
        if usable and len(gpu_caps) == len(usable):
            self.fields[
                "gpu"
            ].help_text += (
                f" Your role may use at most {milli_to_gpus(max(gpu_caps))} GPUs in total."
            )
        if usable and len(prio_caps) == len(usable):
            top = max(prio_caps)
            self.fields["priority"].widget.attrs["max"] = str(top)
            self.fields["priority"].help_text = f"1-{top} for your role."
            if (self.fields["priority"].initial or 5) > top:
                self.fields["priority"].initial = top

    def full_clean(self) -> None:
        """Django's cleaning, then its field errors in plain words."""
        super().full_clean()
        found: Any = getattr(self, "_errors", None)  # ErrorDict; None before any cleaning
        for name, errors in list((found or {}).items()):
            field = self.fields.get(name)
            if field is not None:
                plain = [plain_error(name, field, e) for e in errors.as_data()]
                found[name] = self.error_class(plain, renderer=self.renderer)

    def shape_values(self) -> dict[str, int]:
        """The Shape's fields in the core's units: milli-GPU, millicores, MiB."""
        data = self.cleaned_data
        return {
            "replicas": data["replicas"],
            "gpu": int(data["gpu"] * 1000),
            "cpu": int(data["cpu"] * 1000),
            "memory": int(data["memory"] * 1024),
            "priority": data["priority"],
        }


# The ExitCodeAndErrorMsg lists, named as job_submit names them.
POLICY_LISTS = ("retry_exit_codes", "retry_messages", "fail_exit_codes", "fail_messages")


class ExitCodesField(forms.CharField):
    """Exit codes separated by commas or spaces, as a list of whole numbers."""

    def to_python(self, value: Any) -> list[int]:  # type: ignore[override]
        """The numbers written; the service checks their range."""
        text = super().to_python(value) or ""
        codes = []
        for part in text.replace(",", " ").split():
            if not part.lstrip("-").isdigit():
                raise ValidationError(f"{part!r} is not an exit code: write whole numbers.")
            codes.append(int(part))
        return codes


class PatternsField(forms.CharField):
    """Message patterns, one a line, as a list (the service checks each compiles)."""

    widget = forms.Textarea(attrs={"rows": 2})

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        """The non-empty lines."""
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


def _codes(label: str) -> ExitCodesField:
    return ExitCodesField(
        label=label, required=False, help_text="Separated by commas, like 137, 143."
    )


def _patterns(label: str) -> PatternsField:
    return PatternsField(
        label=label,
        required=False,
        help_text="One regular expression a line, searched in the termination message.",
    )


class JobSubmitForm(WorkloadForm):
    """Submit a training job (PAI DLC)."""

    idle_policy = forms.ChoiceField(
        label="Idle Resources",
        choices=IdlePolicy.choices,
        initial=IdlePolicy.NONE,
        widget=forms.RadioSelect,
        help_text="Acceptable: run In Quota if it fits, else on idle capacity (preemptible). "
        "Only Idle Resources: always borrow.",
    )
    checkpoint_minutes = WholeNumberField(
        label="Checkpoint interval (minutes)", min_value=1, max_value=INT32 // 60, initial=30
    )
    work_hours = NumberField(
        label="Work (GPU-hours, simulated)",
        min_value=Decimal("0.001"),
        decimal_places=3,
        required=False,
        help_text="Leave empty for one hour on all its GPUs.",
    )
    fault_tolerance = forms.BooleanField(
        label="Automatic Fault Tolerance", required=False, initial=True
    )
    max_restarts = WholeNumberField(label="Max restarts", min_value=0, max_value=100, initial=3)
    restart_mode = forms.ChoiceField(
        label="Restart", choices=RestartMode.choices, initial=RestartMode.SYNC
    )
    hang_minutes = WholeNumberField(
        label="Hang detection (minutes without progress)",
        min_value=1,
        required=False,
        help_text="Empty: off.",
    )
    failure_policy = forms.ChoiceField(
        label="Failure policy",
        choices=FailurePolicy.choices,
        initial=FailurePolicy.ANY,
        required=False,  # left out: any failure is retried, as before the policy existed
        help_text="By exit code and error message: only the listed failures are retried; "
        "any other failure fails the job.",
    )
    retry_exit_codes = _codes("Retry on exit codes")
    retry_messages = _patterns("Retry on messages")
    fail_exit_codes = _codes("Fail at once on exit codes")
    fail_messages = _patterns("Fail at once on messages")

    ALIASES = {
        "node_pools": "node_pool",
        "checkpoint_interval": "checkpoint_minutes",
        "total_work": "work_hours",
    }

    def job_values(self) -> dict[str, Any]:
        """job_submit's keyword arguments other than actor, workspace and shape."""
        data = self.cleaned_data
        work = data.get("work_hours")
        return {
            "quota": data["quota"],
            "name": data["name"],
            "node_pools": [data["node_pool"]],
            "idle_policy": data["idle_policy"],
            "checkpoint_interval": data["checkpoint_minutes"] * 60,
            "total_work": float(work) * 3600 if work is not None else None,
            "fault_tolerance": data["fault_tolerance"],
            "max_restarts": data["max_restarts"],
            "restart_mode": data["restart_mode"],
            "hang_minutes": data.get("hang_minutes"),
            "failure_policy": data.get("failure_policy") or FailurePolicy.ANY,
            **{name: data.get(name) or [] for name in POLICY_LISTS},
        }


class ServiceCreateForm(WorkloadForm):
    """Create an inference service (PAI EAS)."""

    replicas = WholeNumberField(min_value=0, initial=1)
    min_replicas = WholeNumberField(min_value=0, initial=1, help_text="0: may scale to zero.")
    max_replicas = WholeNumberField(min_value=1, initial=4)

    ALIASES = {"node_pools": "node_pool"}

    field_order = ["name", "quota", "node_pool", "replicas", "min_replicas", "max_replicas"]


class InstanceStartForm(WorkloadForm):
    """Start an interactive instance (PAI DSW / Run:ai workspace)."""

    max_hours = NumberField(
        label="Maximum duration (hours)",
        min_value=Decimal("0.02"),
        max_value=Decimal(INT32 // 3600),  # max_duration is seconds in a 32-bit column
        decimal_places=2,
        initial=4,
    )
    idle_stop_minutes = WholeNumberField(
        label="Idle auto-stop (minutes)", min_value=1, required=False, help_text="Empty: off."
    )

    ALIASES = {"node_pools": "node_pool", "max_duration": "max_hours"}

    def __init__(self, *args: Any, limits: InstanceLimits = NO_LIMITS, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        del self.fields["replicas"]
        del self.fields["priority"]
        # An instance is one pod: its shape is the instance's, with no replicas to speak of.
        self.fields["name"].help_text = "Lower-case letters, digits and -, like notebook-1."
        self.fields["gpu"].label = "GPUs"
        self.fields["cpu"].label = "CPU cores"
        self.fields["memory"].label = "Memory (GiB)"
        hours: Any = self.fields["max_hours"]
        if limits.default is not None:
            # Left empty, the service applies the workspace's default.
            hours.required = False
            hours.initial = None
            hours.help_text = f"Empty: the workspace's default, {duration_text(limits.default)}."
        if limits.maximum is not None:
            cap = Decimal(limits.maximum) / 3600
            hours.widget.attrs["max"] = f"{cap:.2f}"
            if hours.initial is not None and hours.initial > cap:
                hours.initial = cap.quantize(Decimal("0.01"), rounding=ROUND_DOWN)

    def shape_values(self) -> dict[str, int]:
        """One replica at the default priority."""
        data = self.cleaned_data
        return {
            "replicas": 1,
            "gpu": int(data["gpu"] * 1000),
            "cpu": int(data["cpu"] * 1000),
            "memory": int(data["memory"] * 1024),
            "priority": 5,
        }


class ScaleForm(forms.Form):
    """Set an inference service's target replicas by hand."""

    replicas = WholeNumberField(min_value=0, label="Target replicas")


DEFAULT_RULE_ZONE = "UTC"


@functools.cache
def time_zones() -> tuple[str, ...]:
    """Every IANA zone this machine knows, by name (UTC among them)."""
    return tuple(sorted(zoneinfo.available_timezones() | {DEFAULT_RULE_ZONE}))


class ScalingRuleForm(forms.ModelForm):  # type: ignore[type-arg]
    """A scheduled scaling rule: the service validates cron, time zone and target."""

    target_replicas = WholeNumberField(min_value=0, label="Target replicas")
    timezone = forms.ChoiceField(
        label="Time zone",
        initial=DEFAULT_RULE_ZONE,
        help_text="The cron times are wall-clock times in this zone, daylight saving included.",
        error_messages={
            "required": "Choose a time zone, such as UTC or Asia/Shanghai.",
            "invalid_choice": "Choose a time zone from the list, such as UTC or Asia/Shanghai.",
        },
    )
    name = forms.CharField(
        max_length=63,
        strip=False,
        validators=[names.rule_name],
        help_text="Lower-case letters, digits and -, like weekday-morning.",
    )

    class Meta:
        model = ScalingRule
        fields = ["name", "cron", "timezone", "target_replicas", "exclude_cron", "enabled"]
        labels = {
            "cron": "Cron expression",
            "timezone": "Time zone",
            "exclude_cron": "Except (cron)",
        }
        help_texts = {
            "cron": "minute hour day month weekday, e.g. 0 8 * * *",
            "exclude_cron": "Firings matching this are skipped, e.g. * * * * 6,0 for weekends.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        zones = time_zones()
        current = self.initial.get("timezone") or DEFAULT_RULE_ZONE
        if current not in zones:  # a rule written through the API under another spelling
            zones = (current, *zones)
        field: Any = self.fields["timezone"]
        field.choices = [(z, z.replace("_", " ")) for z in zones]

    def _post_clean(self) -> None:
        """Skip model validation (unique name is the service's to refuse, with its message)."""

    def rule_values(self) -> dict[str, Any]:
        """The service's keyword arguments."""
        return {key: self.cleaned_data[key] for key in self.Meta.fields}
