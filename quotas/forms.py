"""Forms of the Resource Quota pages: they parse what people type; the services decide.

Amounts are typed as GPUs (fractions allowed), CPU cores and GiB, and handed to the services
as milli-GPUs, millicores and MiB. A refused change comes back as a DomainError, which
`add_service_error` shows on the field it concerns.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms

from cluster.models import NodePool, ResourcePool
from console import names
from console.errors import DomainError
from console.numbers import BIG, NumberField, WholeNumberField
from console.units import gpus_to_milli
from quotas.amounts import RESOURCES, Amounts
from quotas.choices import QueueStrategy
from quotas.models import Quota

RESOURCE_LABEL = {"gpu": "GPUs", "cpu": "CPU cores", "memory": "Memory GiB"}
BOUND_LABEL = {"min": "guaranteed", "max": "limit"}


def amount_field_name(node_pool: NodePool, bound: str, resource: str) -> str:
    """The form field holding one amount of one node pool, e.g. np3_min_gpu."""
    return f"np{node_pool.pk}_{bound}_{resource}"


def to_display(resource: str, value: int | None) -> Decimal | None:
    """Milli-GPUs, millicores or MiB as the form shows them: GPUs, cores, GiB."""
    if value is None:
        return None
    per_unit = 1024 if resource == "memory" else 1000
    amount = Decimal(value) / per_unit
    # normalize() alone would show 100 as 1E+2
    return (
        amount.quantize(Decimal(1)) if amount == amount.to_integral_value() else amount.normalize()
    )


def to_internal(resource: str, value: Decimal) -> int:
    """GPUs, cores or GiB as typed into milli-GPUs, millicores or MiB; refuse finer steps."""
    if resource == "gpu":
        try:
            return gpus_to_milli(value)
        except DomainError as err:
            raise forms.ValidationError(err.message) from None
    per_unit = 1024 if resource == "memory" else 1000
    amount = value * per_unit
    if amount != amount.to_integral_value():
        unit = "1 MiB" if resource == "memory" else "1 millicore"
        raise forms.ValidationError(f"{value} is finer than {unit}.")
    if amount > BIG:  # what the 64-bit column takes, as the API's fields allow
        largest = int(BIG / Decimal(per_unit))
        raise forms.ValidationError(f"{value} is more than {largest:,}.")
    return int(amount)


class AmountsForm(forms.Form):
    """Guaranteed (min) and limit (max) GPUs, CPU cores and memory for each node pool."""

    def __init__(
        self,
        *args: Any,
        node_pools: list[NodePool],
        amounts: dict[int, Amounts] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.node_pools = node_pools
        amounts = amounts or {}
        for np in node_pools:
            current = amounts.get(np.pk, Amounts())
            for bound in ("min", "max"):
                for r in RESOURCES:
                    value = current.min(r) if bound == "min" else current.max(r)
                    label = f"{np.name} {RESOURCE_LABEL[r]} {BOUND_LABEL[bound]}"
                    self.fields[amount_field_name(np, bound, r)] = NumberField(
                        label=label,
                        required=False,
                        min_value=Decimal(0),
                        decimal_places=3,
                        initial=to_display(r, value),
                        widget=forms.NumberInput(
                            attrs={"step": "any", "aria-label": label, "class": "amount"}
                        ),
                    )

    def clean(self) -> dict[str, Any]:
        """Convert every amount to its internal unit, error by error on its own field."""
        cleaned = super().clean() or {}
        for np in self.node_pools:
            for bound in ("min", "max"):
                for r in RESOURCES:
                    name = amount_field_name(np, bound, r)
                    value = cleaned.get(name)
                    if value is None:
                        continue
                    try:
                        cleaned[name] = to_internal(r, value)
                    except forms.ValidationError as err:
                        self.add_error(name, err)
        return cleaned

    def pool_fields(self) -> list[tuple[NodePool, list[list[forms.BoundField]]]]:
        """For the template: per node pool, the [min, max] bound fields of each resource."""
        return [
            (
                np,
                [[self[amount_field_name(np, b, r)] for b in ("min", "max")] for r in RESOURCES],
            )
            for np in self.node_pools
        ]

    def given(self, np: NodePool) -> bool:
        """Whether any amount of the node pool was typed (a non-zero min or any max)."""
        return any(
            self.cleaned_data.get(amount_field_name(np, "min", r)) for r in RESOURCES
        ) or any(
            self.cleaned_data.get(amount_field_name(np, "max", r)) is not None for r in RESOURCES
        )

    def amounts_of(self, np: NodePool) -> Amounts:
        """The typed amounts of one node pool, in internal units; an empty min is 0."""
        data = self.cleaned_data

        def get(bound: str, r: str) -> int | None:
            value = data.get(amount_field_name(np, bound, r))
            return None if value is None else int(value)

        return Amounts(
            min_gpu=get("min", "gpu") or 0,
            min_cpu=get("min", "cpu") or 0,
            min_memory=get("min", "memory") or 0,
            max_gpu=get("max", "gpu"),
            max_cpu=get("max", "cpu"),
            max_memory=get("max", "memory"),
        )

    def resources(self) -> dict[NodePool, Amounts]:
        """Amounts for every node pool of the form."""
        return {np: self.amounts_of(np) for np in self.node_pools}

    def error_field(self, err: DomainError) -> str | None:
        """The form field a service error concerns, or None for the whole form."""
        if err.field in self.fields:
            return err.field
        if err.field and err.field.startswith(("min_", "max_")):
            pool_name = getattr(err, "node_pool", None)
            candidates = [np for np in self.node_pools if np.name == pool_name]
            if not candidates and len(self.node_pools) == 1:
                candidates = self.node_pools
            if candidates:
                bound, resource = err.field.split("_", 1)
                return amount_field_name(candidates[0], bound, resource)
        return None

    def add_service_error(self, err: DomainError) -> None:
        """Show a refused change on the field it concerns."""
        self.add_error(self.error_field(err), err.message)


def allowed_pools_field(
    node_pools: list[NodePool], parent: Quota | None, parent_pools: dict[int, str] | None
) -> forms.ModelMultipleChoiceField:  # type: ignore[type-arg]
    """Checkboxes of the node pools a quota may be restricted to: those its parent allows."""
    offered = [np.pk for np in node_pools if parent_pools is None or np.pk in parent_pools]
    if parent is None:
        empty = "every pool of its resource pool"
    elif parent_pools is None:
        empty = f"every pool {parent.name} allows"
    else:
        empty = f"every pool {parent.name} allows ({', '.join(sorted(parent_pools.values()))})"
    return forms.ModelMultipleChoiceField(
        queryset=NodePool.objects.filter(pk__in=offered).order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Allowed node pools",
        help_text="Its workloads, and its child quotas', run only in the checked pools. "
        f"None checked: {empty}.",
    )


class QuotaForm(AmountsForm):
    """Add Resource Quota; with a parent, New Child-level Resource Quota."""

    name = forms.CharField(max_length=100, strip=False, validators=[names.quota_name])
    resource_pool = forms.ModelChoiceField(queryset=ResourcePool.objects.all())
    over_quota_weight = NumberField(
        required=False,
        label="Over-quota weight",
        help_text="Share of borrowed capacity. Empty: proportional to min.",
    )
    child_preemption = forms.BooleanField(
        required=False,
        label="Child-level preemption",
        help_text="Workloads of this quota may preempt training jobs of its child quotas.",
    )
    lend_idle = forms.BooleanField(
        required=False, initial=True, label="Lend idle resources", help_text="Others may borrow."
    )
    queue_strategy = forms.ChoiceField(
        choices=QueueStrategy.choices, initial=QueueStrategy.PRIORITY
    )

    field_order = ["name", "resource_pool"]

    def __init__(
        self,
        *args: Any,
        parent: Quota | None = None,
        parent_pools: dict[int, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.parent = parent
        self.fields["allowed_node_pools"] = allowed_pools_field(
            self.node_pools, parent, parent_pools
        )
        if parent is not None:
            del self.fields["resource_pool"]
        elif ResourcePool.objects.count() == 1:
            self.fields["resource_pool"].initial = ResourcePool.objects.get()

    def service_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of quota_create."""
        data = self.cleaned_data
        resource_pool = self.parent.resource_pool if self.parent else data["resource_pool"]
        # Pools of another resource pool are passed only when typed into, so the service
        # refuses them instead of silently dropping what the user typed.
        resources = {
            np: self.amounts_of(np)
            for np in self.node_pools
            if np.resource_pool_id == resource_pool.pk or self.given(np)
        }
        return {
            "name": data["name"],
            "resource_pool": resource_pool,
            "parent": self.parent,
            "resources": resources,
            "over_quota_weight": (
                None if data.get("over_quota_weight") is None else float(data["over_quota_weight"])
            ),
            "child_preemption": data.get("child_preemption", False),
            "lend_idle": data.get("lend_idle", False),
            "queue_strategy": data["queue_strategy"],
            "allowed_node_pools": list(data.get("allowed_node_pools") or []),
        }

    def error_field(self, err: DomainError) -> str | None:
        """The settings fields answer for themselves; a parent error concerns the whole form."""
        if err.field == "parent":
            return None
        return super().error_field(err)


class ScaleForm(AmountsForm):
    """Scale a quota: its min and max on each node pool of its resource pool."""

    version = WholeNumberField(widget=forms.HiddenInput)

    def error_field(self, err: DomainError) -> str | None:
        """A stale version concerns the whole form."""
        if err.field == "version":
            return None
        return super().error_field(err)


class NodePoolsForm(forms.Form):
    """Restrict a quota's workloads (and its descendants') to some node pools."""

    version = WholeNumberField(widget=forms.HiddenInput)

    def __init__(
        self,
        *args: Any,
        quota: Quota,
        node_pools: list[NodePool],
        parent_pools: dict[int, str] | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["allowed_node_pools"] = allowed_pools_field(
            node_pools, quota.parent, parent_pools
        )

    def add_service_error(self, err: DomainError) -> None:
        """A stale version concerns the whole form; the rest, the pools."""
        self.add_error(None if err.field == "version" else "allowed_node_pools", err.message)


class RebalanceForm(forms.Form):
    """Move guaranteed amounts from one quota to a sibling, in one transaction."""

    target = forms.ModelChoiceField(queryset=Quota.objects.none(), label="To quota")
    node_pool = forms.ModelChoiceField(queryset=NodePool.objects.none())
    gpu = NumberField(
        label="GPUs", required=False, min_value=Decimal(0), decimal_places=3, initial=0
    )
    cpu = NumberField(
        label="CPU cores", required=False, min_value=Decimal(0), decimal_places=3, initial=0
    )
    memory = NumberField(
        label="Memory GiB", required=False, min_value=Decimal(0), decimal_places=3, initial=0
    )

    def __init__(self, *args: Any, source: Quota, siblings: list[Quota], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source = source
        target = self.fields["target"]
        assert isinstance(target, forms.ModelChoiceField)
        target.queryset = Quota.objects.filter(pk__in=[q.pk for q in siblings]).order_by("name")
        if len(siblings) == 1:
            target.initial = siblings[0]
        node_pool = self.fields["node_pool"]
        assert isinstance(node_pool, forms.ModelChoiceField)
        node_pool.queryset = NodePool.objects.filter(resource_pool_id=source.resource_pool_id)
        if node_pool.queryset.count() == 1:
            node_pool.initial = node_pool.queryset.get()

    def clean(self) -> dict[str, Any]:
        """Convert the amounts to milli-GPUs, millicores and MiB."""
        cleaned = super().clean() or {}
        for r in RESOURCES:
            value = cleaned.get(r)
            if value is None:
                cleaned[r] = 0
                continue
            try:
                cleaned[r] = to_internal(r, value)
            except forms.ValidationError as err:
                self.add_error(r, err)
        return cleaned

    def service_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of quota_rebalance (without the actor)."""
        data = self.cleaned_data
        return {
            "source": self.source,
            "target": data["target"],
            "node_pool": data["node_pool"],
            **{r: data[r] for r in RESOURCES},
        }

    def change_line(self) -> str:
        """The move as people read it, e.g. "8 GPUs on A100-80G from Quota 1.2 to Quota 1.1"."""
        data = self.cleaned_data
        units = {"gpu": "GPUs", "cpu": "CPU cores", "memory": "GiB memory"}
        amounts = [f"{to_display(r, data[r])} {units[r]}" for r in RESOURCES if data.get(r)]
        return (
            f"{' and '.join(amounts)} guaranteed on {data['node_pool'].name} "
            f"from {self.source.name} to {data['target'].name}"
        )

    def add_service_error(self, err: DomainError) -> None:
        """Show a refused rebalance on the amount or quota it concerns."""
        field = err.field
        if field and field.startswith(("min_", "max_")):
            field = field.split("_", 1)[1]
        if field not in self.fields:
            field = None
        self.add_error(field, err.message)


class ChildPreemptionForm(forms.Form):
    """Turn child-level preemption on or off."""

    enabled = forms.BooleanField(required=False)
    version = WholeNumberField(required=False, widget=forms.HiddenInput)


class QuotaSettingsForm(forms.Form):
    """A quota's name and scheduling settings, as the API's PATCH changes them; `version` is
    the one the page was loaded at, so a change made meanwhile is refused, not overwritten."""

    name = forms.CharField(max_length=100, strip=False, validators=[names.quota_name])
    over_quota_weight = NumberField(
        required=False,
        label="Over-quota weight",
        help_text="Share of borrowed capacity. Empty: proportional to min.",
    )
    lend_idle = forms.BooleanField(
        required=False, label="Lend idle resources", help_text="Others may borrow."
    )
    queue_strategy = forms.ChoiceField(choices=QueueStrategy.choices, label="Queue strategy")
    version = WholeNumberField(widget=forms.HiddenInput)

    def __init__(
        self,
        *args: Any,
        quota: Quota,
        node_pools: list[NodePool],
        parent_pools: dict[int, str] | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.quota = quota
        pools = allowed_pools_field(node_pools, quota.parent, parent_pools)
        pools.error_messages["invalid_choice"] = (
            "Node pool %(value)s is not one this quota may be restricted to."
        )
        self.fields["allowed_node_pools"] = pools
        self.fields["queue_strategy"].error_messages["invalid_choice"] = (
            "Choose a queue strategy from the list."
        )
        self.fields["name"].error_messages["required"] = "Give the quota a name."

    @staticmethod
    def initial_for(quota: Quota) -> dict[str, Any]:
        """The quota's stored settings, as the form shows them."""
        weight = quota.over_quota_weight
        return {
            "name": quota.name,
            "over_quota_weight": None if weight is None else Decimal(str(weight)).normalize(),
            "lend_idle": quota.lend_idle,
            "queue_strategy": quota.queue_strategy,
            "allowed_node_pools": list(quota.allowed_node_pools.all()),
            "version": quota.version,
        }

    def clean_over_quota_weight(self) -> Decimal | None:
        """A weight is above 0; empty means proportional to min."""
        weight: Decimal | None = self.cleaned_data.get("over_quota_weight")
        if weight is not None and weight <= 0:
            raise forms.ValidationError(
                f"Over-quota weight must be above 0, not {weight}; leave it empty for a "
                "share proportional to min."
            )
        return weight

    def changes(self) -> dict[str, Any]:
        """The keyword arguments of quota_update for what differs from the stored quota."""
        data, quota = self.cleaned_data, self.quota
        changed: dict[str, Any] = {}
        if data["name"] != quota.name:
            changed["name"] = data["name"]
        weight = data.get("over_quota_weight")
        weight = None if weight is None else float(weight)
        if weight != quota.over_quota_weight:
            if weight is None:
                changed["clear_weight"] = True
            else:
                changed["over_quota_weight"] = weight
        if data.get("lend_idle", False) != quota.lend_idle:
            changed["lend_idle"] = data.get("lend_idle", False)
        if data["queue_strategy"] != quota.queue_strategy:
            changed["queue_strategy"] = data["queue_strategy"]
        pools = list(data.get("allowed_node_pools") or [])
        if {np.pk for np in pools} != {np.pk for np in quota.allowed_node_pools.all()}:
            changed["allowed_node_pools"] = pools
        return changed

    def field_errors(self) -> list[tuple[str, str]]:
        """(field label, message) of every field's error, for the summary above the form."""
        return [
            (str(self[name].label), str(message))
            for name, messages in self.errors.items()
            if name in self.fields
            for message in messages
        ]

    def add_service_error(self, err: DomainError) -> None:
        """A refused change on the field it names; a stale version concerns the whole form."""
        field = err.field if err.field in self.fields and err.field != "version" else None
        self.add_error(field, err.message)
