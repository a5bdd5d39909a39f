"""The query-string filters and sort of the workload list pages (django-filter)."""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import Case, F, FloatField, QuerySet, Value, When

from console.numbers import BIG
from jobs.choices import Status
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


class JobFilter(django_filters.FilterSet):  # type: ignore[misc]
    """The training job list's filters; a bad value is left out and reported, never a 500."""

    status = django_filters.ChoiceFilter(label="Status", choices=Status.choices)
    owner = IdFilter(label="Owner", field_name="owner_id", min_value=1, max_value=BIG)
    quota = django_filters.ChoiceFilter(
        label="Idle Resources", choices=QUOTA_CHOICES, method="_quota"
    )
    sort = SortFilter(label="Sort", fields={key: key for key in SORTS})

    def __init__(self, data: Any, queryset: QuerySet[Workload]) -> None:
        # Unsorted (or badly sorted) lists come newest first.
        super().__init__(data, queryset=workloads_sorted(queryset, DEFAULT_SORT))

    def _quota(self, queryset: QuerySet[Workload], name: str, value: str) -> QuerySet[Workload]:
        return queryset.filter(in_quota=value == "in")

    @property
    def given(self) -> dict[str, str]:
        """The query string's values that validated, as given (the pages' links keep them)."""
        self.is_valid()
        cleaned = self.form.cleaned_data
        return {
            name: str(self.data[name])
            for name in ("status", "owner", "quota", "sort")
            if cleaned.get(name) not in (None, "", [])
        }

    @property
    def problems(self) -> list[str]:
        """One line per refused parameter: its label and the reason."""
        return [
            f"{self.filters[name].label}: {' '.join(errors)}"
            for name, errors in self.errors.items()
        ]
