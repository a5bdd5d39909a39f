"""The OpenAPI document tells the truth (console.schema): every operation has a summary and
its error bodies, every number its range, every list filter its type and enum."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator

from jobs.choices import Status

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def _operations(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            yield f"{method.upper()} {path}", operation


def _numbers(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if node.get("type") in ("integer", "number"):
            yield where, node
        for key, value in node.items():
            yield from _numbers(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _numbers(value, f"{where}/{index}")


def test_every_operation_has_a_summary(schema: dict[str, Any]) -> None:
    missing = [label for label, operation in _operations(schema) if not operation.get("summary")]
    assert missing == []


def test_every_number_has_its_range(schema: dict[str, Any]) -> None:
    unbounded = [
        where
        for where, number in _numbers(schema, "#")
        if "minimum" not in number or "maximum" not in number
    ]
    assert unbounded == []


def test_every_operation_documents_its_error_bodies(schema: dict[str, Any]) -> None:
    for label, operation in _operations(schema):
        codes = set(operation["responses"])
        if label.startswith("POST /api/v1/auth/token/") or "/schema/" in label:
            continue
        assert "401" in codes, label
        if not label.startswith("GET"):
            assert {"400", "403"} <= codes, label
        if "{" in label:
            assert "404" in codes, label
    for name in ("ValidationError", "Unauthenticated", "Forbidden", "NotFound", "Conflict"):
        assert name in schema["components"]["schemas"]
    assert "412" in schema["paths"]["/api/v1/quotas/{id}/"]["patch"]["responses"]
    assert "409" in schema["paths"]["/api/v1/jobs/"]["post"]["responses"]


def _property(schema: dict[str, Any], component: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = schema["components"]["schemas"][component]["properties"][name]
    return found


@pytest.mark.parametrize(
    "component, name, low, high",
    [
        ("JobSubmit", "priority", 1, 9),
        ("Job", "priority", 1, 9),
        ("JobSubmit", "replicas", 1, None),
        ("InstanceStart", "replicas", 1, None),
        ("ServiceCreate", "replicas", 0, None),
        ("Service", "replicas", 0, None),
        ("ServiceScale", "replicas", 0, None),
    ],
    ids=lambda v: str(v),
)
def test_fields_carry_the_services_limits(
    schema: dict[str, Any], component: str, name: str, low: int, high: int | None
) -> None:
    field = _property(schema, component, name)
    assert field["minimum"] == low
    if high is not None:
        assert field["maximum"] == high


def test_gpus_per_replica_are_a_fraction_up_to_one_or_whole(schema: dict[str, Any]) -> None:
    gpu = _property(schema, "JobSubmit", "gpu")
    fraction, whole = gpu["anyOf"]
    assert (fraction["type"], fraction["maximum"]) == ("number", 1)
    assert (whole["type"], whole["minimum"]) == ("integer", 0)
    assert "GPU" in gpu["description"]


def test_units_and_read_only_fields_are_shown(schema: dict[str, Any]) -> None:
    assert "millicores" in _property(schema, "JobSubmit", "cpu")["description"]
    assert "MiB" in _property(schema, "JobSubmit", "memory")["description"]
    assert "millicores" in _property(schema, "Job", "cpu")["description"]
    assert _property(schema, "Job", "status")["readOnly"] is True


def test_list_filters_are_parameters_with_their_types_and_enums(schema: dict[str, Any]) -> None:
    for path in ("/api/v1/jobs/", "/api/v1/services/", "/api/v1/instances/"):
        parameters = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}
        assert set(Status.values) == set(parameters["status"]["schema"]["enum"])
        assert parameters["in_quota"]["schema"]["type"] == "boolean"
        assert parameters["preemptible"]["schema"]["type"] == "boolean"
        assert parameters["submitted_after"]["schema"]["format"] == "date-time"
        for name in ("quota", "node_pool", "owner", "search", "workspace", "submitted_before"):
            assert parameters[name]["description"], name
