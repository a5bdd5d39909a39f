"""Workloads built from ``.values()`` rows, as the list (or detail) serializers would show them.

A page of 50 through ``ModelSerializer`` builds about 100 model instances and calls a DRF
field per value; here the page's rows (the view reads them), their node pools and their pods
(and a detail's events) are one query each, and each value takes one converter. The plan of
fields comes from the serializer itself, so the JSON keeps its fields, their order and their
values (tests/api/test_fast_paths.py compares both ways, byte for byte, on every kind).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from rest_framework import ISO_8601, relations, serializers
from rest_framework import fields as f
from rest_framework.settings import api_settings

from console.api import GPUField
from console.fast.statements import Statement
from jobs.models import Pod, Workload, WorkloadEvent

Convert = Callable[[Any], Any]
_ZERO = timedelta(0)
# Values that come straight out of the database as the JSON shows them.
_SAME: tuple[type[f.Field], ...] = (f.CharField, f.ChoiceField)  # type: ignore[type-arg]


def _gpu(value: int) -> float | int:
    """GPUField's representation; whole GPUs (the common case) without Decimal."""
    whole, rest = divmod(int(value), 1000)
    if rest == 0:
        return whole
    return GPUField().to_representation(value)


class _Datetimes:
    """DateTimeField's ISO 8601 representation in the request's time zone."""

    def __init__(self) -> None:
        self.zone = f.DateTimeField().default_timezone()
        # Shown in UTC (a zone fixed at offset 0), a value stored in UTC shows as it is.
        self.utc = self.zone is not None and self.zone.utcoffset(None) == _ZERO

    def __call__(self, value: datetime) -> str:
        shown_as_is = self.utc and value.utcoffset() == _ZERO
        if self.zone is not None and value.tzinfo is not None and not shown_as_is:
            value = value.astimezone(self.zone)
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text


def _datetime_marker(value: Any) -> Any:  # pragma: no cover - replaced by _Datetimes
    raise AssertionError("replaced per request")


def _converter(field: f.Field) -> Convert | None:  # type: ignore[type-arg]
    """The function that shows one stored value as `field` does; None: as stored."""
    kind = type(field)
    if issubclass(kind, GPUField):
        return _gpu
    if (
        kind is f.DateTimeField
        and api_settings.DATETIME_FORMAT == ISO_8601
        and getattr(field, "format", f.empty) is f.empty
        and not hasattr(field, "timezone")
    ):
        return _datetime_marker
    if kind is f.IntegerField:
        return int
    if kind is f.FloatField:
        return float
    if kind is f.BooleanField:
        return bool
    if kind in _SAME or kind is relations.SlugRelatedField:
        return None
    return field.to_representation


Plan = tuple[tuple[str, str, Convert | None], ...]
_POOL_KEYS = ("workload_id", "nodepool__name")


@cache
def _fields_plan(
    serializer_class: type[serializers.Serializer],  # type: ignore[type-arg]
    computed: tuple[str, ...],
) -> Plan:
    """(field name, values() key, converter) in the JSON's order; computed here: ``=name``.

    Derived from the serializer class alone (code, not data), so it is built once.
    """
    plan: list[tuple[str, str, Convert | None]] = []
    for name, field in serializer_class().fields.items():
        if name in computed:
            plan.append((name, f"={name}", None))
        elif isinstance(field, relations.SlugRelatedField):
            plan.append((name, f"{field.source}__{field.slug_field}", None))
        else:
            plan.append((name, field.source or name, _converter(field)))
    return tuple(plan)


def _plan(
    serializer_class: type[serializers.Serializer],  # type: ignore[type-arg]
    computed: tuple[str, ...],
    datetimes: _Datetimes,
) -> Plan:
    """The class's plan with datetimes shown in this request's time zone."""
    return tuple(
        (name, key, datetimes if convert is _datetime_marker else convert)
        for name, key, convert in _fields_plan(serializer_class, computed)
    )


def _build(plan: Plan, row: dict[str, Any]) -> dict[str, Any]:
    """One object of the JSON: each value as stored (None stays None) or converted."""
    return {
        name: value if (value := row[key]) is None or convert is None else convert(value)
        for name, key, convert in plan
    }


def _belonging(shape: tuple[Any, ...], *ids: int) -> Any:
    """values(*keys) of `model`'s rows belonging to the workloads `ids`, in `order`."""
    model, keys, order = shape
    return model.objects.filter(workload_id__in=ids).order_by(*order).values(*keys)


# A page's pools, pods and events (the SQL is made once per number of workloads).
_BELONGING = Statement(_belonging)


def _nested(
    model: Any,
    ids: list[int],
    plan: Plan,
    order: tuple[str, ...],
    extra: Callable[[dict[str, Any]], None] | None = None,
) -> dict[int, list[dict[str, Any]]]:
    """Rows of `model` belonging to the workloads `ids`, shown by `plan`, per workload."""
    keys = tuple(sorted({key for _, key, _ in plan if key[0] != "="} | {"workload_id"}))
    nested: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in _BELONGING.rows(*ids, shape=(model, keys, order)):
        if extra is not None:
            extra(row)
        nested[row["workload_id"]].append(_build(plan, row))
    return nested


def _pod_name(pod: dict[str, Any]) -> None:
    pod["=name"] = f"tp-{pod['workload_id']}-{pod['index']}-{pod['attempt']}"


def _computed(events: bool) -> tuple[str, ...]:
    """The fields filled here rather than read from the workload's row."""
    return ("pods", "node_pools", *(("events",) if events else ()))


def row_keys(
    serializer_class: type[serializers.Serializer],  # type: ignore[type-arg]
    *,
    events: bool = False,
) -> list[str]:
    """The ``values()`` keys that `serializer_class` shows of a workload's own row."""
    plan = _fields_plan(serializer_class, _computed(events))
    return sorted({key for _, key, _ in plan if key[0] != "="} | {"id"})


def build_workloads(
    rows: list[dict[str, Any]],
    serializer_class: type[serializers.Serializer],  # type: ignore[type-arg]
    pod_serializer_class: type[serializers.Serializer],  # type: ignore[type-arg]
    event_serializer_class: type[serializers.Serializer] | None = None,  # type: ignore[type-arg]
    pod_statuses: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """Workload `rows` (``values(*row_keys(...))``, in order) as `serializer_class` shows them;
    only the pods whose status is in `pod_statuses` when given.

    Two more queries (node pools, pods), three with the event timeline of a detail view.
    """
    if not rows:
        return []
    ids = [row["id"] for row in rows]
    datetimes = _Datetimes()
    plan = _plan(serializer_class, _computed(event_serializer_class is not None), datetimes)

    pools: dict[int, list[str]] = defaultdict(list)
    shape = (Workload.node_pools.through, _POOL_KEYS, ("nodepool__name",))
    for pool in _BELONGING.rows(*ids, shape=shape):
        pools[pool["workload_id"]].append(pool["nodepool__name"])

    pod_plan = _plan(pod_serializer_class, ("name",), datetimes)
    pods = _nested(Pod, ids, pod_plan, ("index", "attempt"), _pod_name)
    if pod_statuses is not None:
        pods = {pk: [p for p in shown if p["status"] in pod_statuses] for pk, shown in pods.items()}
    events = {}
    if event_serializer_class is not None:
        event_plan = _plan(event_serializer_class, (), datetimes)
        events = _nested(WorkloadEvent, ids, event_plan, ("at", "id"))

    built = []
    for row in rows:
        pk = row["id"]
        row["=pods"] = pods.get(pk, [])
        row["=node_pools"] = pools.get(pk, [])
        row["=events"] = events.get(pk, [])
        built.append(_build(plan, row))
    return built


def workload_rows(
    ids: Iterable[int],
    serializer_class: type[serializers.Serializer],  # type: ignore[type-arg]
    pod_serializer_class: type[serializers.Serializer],  # type: ignore[type-arg]
    event_serializer_class: type[serializers.Serializer] | None = None,  # type: ignore[type-arg]
    pod_statuses: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """The workloads `ids` (in this order, missing ones left out) as build_workloads shows them."""
    ids = list(ids)
    keys = row_keys(serializer_class, events=event_serializer_class is not None)
    found = {r["id"]: r for r in Workload.objects.filter(pk__in=ids).order_by().values(*keys)}
    rows = [found[pk] for pk in ids if pk in found]
    return build_workloads(
        rows, serializer_class, pod_serializer_class, event_serializer_class, pod_statuses
    )
