"""The query-string filters of the workload lists (django-filter): the pages' and the API's.

Both share the filters' definitions (status matched without regard to case, In Quota or
not); the API's set refuses what it cannot filter (console.api.FilterSetBackend) and is the
one the fast list path applies too (jobs.api.views).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Case, F, FloatField, Q, QuerySet, Value, When
from django_filters.fields import ChoiceField
from rest_framework import serializers

from console.numbers import BIG
from jobs.choices import Kind, Status
from jobs.models import Workload

# ?sort= value → order_by terms; a leading "-" on the value reverses them.
SORTS: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "owner": ("owner__username", "-submitted_at"),
    "gpus": ("total_gpus", "-submitted_at"),
    "priority": ("priority", "-submitted_at"),
    "status": ("status", "-submitted_at"),
    "quota": ("in_quota", "-submitted_at"),
    "restarts": ("restarts", "-submitted_at"),
    "progress": ("progress_ratio", "-submitted_at"),
    "age": ("-submitted_at", "-id"),
}
DEFAULT_SORT = "age"
QUOTA_CHOICES = (("in", "In Quota"), ("not", "Not in Quota"))


def _reverse(terms: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(t[1:] if t.startswith("-") else f"-{t}" for t in terms)


def workloads_sorted(queryset: QuerySet[Workload], sort: str) -> QuerySet[Workload]:
    """Order by a column; GPUs and progress are computed in SQL so any page sorts correctly."""
    key = sort.lstrip("-")
    terms = SORTS[key]
    if sort.startswith("-"):
        terms = _reverse(terms)
    if key == "gpus":
        queryset = queryset.annotate(total_gpus=F("gpu") * F("replicas"))
    if key == "progress":
        queryset = queryset.annotate(
            progress_ratio=Case(
                When(total_work__gt=0, then=F("progress") / F("total_work")),
                default=Value(0.0),
                output_field=FloatField(),
            )
        )
    return queryset.order_by(*terms, "-id")


class IdFilter(django_filters.NumberFilter):  # type: ignore[misc]
    """A row id: a whole number the database can hold."""

    field_class = forms.IntegerField


class SortFilter(django_filters.OrderingFilter):  # type: ignore[misc]
    """?sort=<column> or -<column>, ordered by that column's SORTS terms."""

    def filter(self, qs: QuerySet[Workload], value: Any) -> QuerySet[Workload]:
        """The first sort given wins; none leaves the queryset's own order."""
        return workloads_sorted(qs, value[0]) if value else qs


class AnyCaseChoiceField(ChoiceField):  # type: ignore[misc]
    """A choice matched without regard to case, cleaned to its own spelling; a refusal names
    the allowed values."""

    def to_python(self, value: Any) -> Any:
        """``running`` → ``Running``; what matches no choice stays as given (and is refused)."""
        value = super().to_python(value)
        spelled = {str(key).lower(): key for key, _ in self.choices if key != ""}
        return spelled.get(str(value).lower(), value)

    def validate(self, value: Any) -> None:
        """Django's check, with the allowed values in the message."""
        try:
            super().validate(value)
        except ValidationError:
            allowed = ", ".join(str(key) for key, _ in self.choices if key != "")
            raise ValidationError(
                f"Select a valid choice. {value} is not one of the available choices: {allowed}.",
                code="invalid_choice",
            ) from None


class StatusFilter(django_filters.ChoiceFilter):  # type: ignore[misc]
    """A workload's status, in any case (``?status=running``)."""

    field_class = AnyCaseChoiceField

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("choices", Status.choices)
        kwargs.setdefault("label", "Status")
        super().__init__(**kwargs)


class StrictBooleanField(forms.Field):
    """true or false (also 1/0, yes/no, any case); anything else is refused, not ignored."""

    SPELLINGS: Mapping[str, bool] = {
        "true": True, "1": True, "yes": True, "false": False, "0": False, "no": False,
    }  # fmt: skip

    def to_python(self, value: Any) -> bool | None:
        """The boolean a query string spells, None when empty."""
        if value in (None, ""):
            return None
        if isinstance(value, bool):
            return value
        found = self.SPELLINGS.get(str(value).strip().lower())
        if found is None:
            raise ValidationError(
                f"{value!r} is not a boolean; the allowed values are true and false.",
                code="invalid",
            )
        return found


class StrictBooleanFilter(django_filters.BooleanFilter):  # type: ignore[misc]
    """A boolean filter that refuses what is neither true nor false."""

    field_class = StrictBooleanField


def in_quota(queryset: QuerySet[Workload], value: bool) -> QuerySet[Workload]:
    """Workloads admitted In Quota (True) or Not in Quota (False); queued ones are neither."""
    return queryset.filter(in_quota=value)


class JobFilter(django_filters.FilterSet):  # type: ignore[misc]
    """The training job list's filters; a bad value is left out and reported, never a 500."""

    status = StatusFilter()
    owner = IdFilter(label="Owner", field_name="owner_id", min_value=1, max_value=BIG)
    quota = django_filters.ChoiceFilter(
        label="Quota status", choices=QUOTA_CHOICES, method="_quota"
    )
    sort = SortFilter(label="Sort", fields={key: key for key in SORTS})

    def __init__(self, data: Any, queryset: QuerySet[Workload]) -> None:
        # Unsorted (or badly sorted) lists come newest first.
        super().__init__(data, queryset=workloads_sorted(queryset, DEFAULT_SORT))

    def _quota(self, queryset: QuerySet[Workload], name: str, value: str) -> QuerySet[Workload]:
        return in_quota(queryset, value == "in")

    @property
    def given(self) -> dict[str, str]:
        """The query string's values that validated, as given (the pages' links keep them)."""
        self.is_valid()
        cleaned = self.form.cleaned_data
        return {
            name: str(self.data[name])
            for name in self.filters
            if cleaned.get(name) not in (None, "", [])
        }

    @property
    def problems(self) -> list[str]:
        """One line per refused parameter: its label and the reason."""
        return [
            f"{self.filters[name].label}: {' '.join(errors)}"
            for name, errors in self.errors.items()
        ]


class AllJobFilter(JobFilter):
    """The All jobs page's filters: the workspace list's, plus workspace, quota and a part of
    the name (``quota`` stays the quota status, as on a workspace's list)."""

    workspace = IdFilter(label="Workspace", field_name="workspace_id", min_value=1, max_value=BIG)
    quota_id = IdFilter(label="Quota", field_name="quota_id", min_value=1, max_value=BIG)
    search = django_filters.CharFilter(
        label="Name", field_name="name", lookup_expr="icontains", max_length=63
    )


class WorkloadFilter(django_filters.FilterSet):  # type: ignore[misc]
    """The API's workload list filters (jobs, services, instances).

    The list answers 400 for a parameter not declared here (pagination and format aside) and
    for a value a filter cannot take (console.api.FilterSetBackend). Both list paths apply
    these filters with ``apply``: the stock one to the viewset's queryset, the fast one
    inside its compiled statements.
    """

    workspace = django_filters.CharFilter(field_name="workspace__name", help_text="Workspace name.")
    status = StatusFilter(help_text="Status (any case).")
    in_quota = StrictBooleanFilter(
        method="_in_quota",
        help_text="true: admitted In Quota; false: admitted Not in Quota (running on "
        "borrowed capacity, preemptible). Queued workloads are neither.",
    )
    preemptible = StrictBooleanFilter(
        method="_preemptible",
        help_text="true: workloads a preemption may evict (training jobs); false: inference "
        "services and interactive instances.",
    )
    quota = django_filters.CharFilter(method="_quota", help_text="Quota name or id.")
    node_pool = django_filters.CharFilter(
        field_name="node_pools__name", help_text="A node pool the workload accepts, by name."
    )
    owner = django_filters.CharFilter(
        field_name="owner__username", help_text="Username of the submitter."
    )
    name = django_filters.CharFilter(field_name="name", help_text="Workload name (exact).")
    search = django_filters.CharFilter(
        field_name="name",
        lookup_expr="icontains",
        help_text="Part of the workload name, in any case.",
    )
    submitted_after = django_filters.IsoDateTimeFilter(
        field_name="submitted_at",
        lookup_expr="gte",
        help_text="Submitted at or after this time (ISO 8601).",
    )
    submitted_before = django_filters.IsoDateTimeFilter(
        field_name="submitted_at",
        lookup_expr="lt",
        help_text="Submitted before this time (ISO 8601).",
    )

    # Filters whose cleaned value is free text: the fast list path passes them as values of
    # its compiled statements; the others (a few values each) shape the statement.
    TEXT = frozenset({"workspace", "quota", "node_pool", "owner", "name", "search"})

    def _in_quota(self, queryset: QuerySet[Workload], name: str, value: bool) -> Any:
        return in_quota(queryset, value)

    def _preemptible(self, queryset: QuerySet[Workload], name: str, value: bool) -> Any:
        # The scheduling core's rule (jobs.scheduling.types): only training jobs are preempted.
        training = Q(kind=Kind.TRAINING)
        return queryset.filter(training if value else ~training)

    def _quota(self, queryset: QuerySet[Workload], name: str, value: str) -> Any:
        by_id = Q()
        if value.isdigit() and len(value) <= 18:  # an id, in any script's digits (as the ORM)
            try:
                by_id = Q(quota_id=int(value))
            except ValueError:  # a digit int() refuses ("²")
                raise serializers.ValidationError(
                    {name: [f"{value!r} is not valid here."]}
                ) from None
        return queryset.filter(Q(quota__name=value) | by_id)

    @classmethod
    def apply(cls, queryset: QuerySet[Any], cleaned: Mapping[str, Any]) -> QuerySet[Any]:
        """`queryset` through the filters given `cleaned` values (as the form cleans them),
        in declared order; empty values filter nothing."""
        filters = cls(queryset=queryset).filters
        for name, value in cleaned.items():
            queryset = filters[name].filter(queryset, value)
        return queryset
