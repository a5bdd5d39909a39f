"""The OpenAPI document's own rules (drf-spectacular's AutoSchema, set in REST_FRAMEWORK).

- Every operation has a summary: the first line of its method's docstring, else one made of
  its verb and resource ("List jobs").
- Every number has its range: a serializer's ``schema_ranges`` (the services' own limits,
  such as priority 1-9), else the bounds of the model column behind a field, else a whole
  number's 32-bit column.
- Every operation documents the error bodies it may answer: 400 (a field's or parameter's
  messages), 401, 403, 404, 409 and 412 (``{"detail": …}`` or messages per field).

tests/api/test_schema.py walks the document and holds it to these rules.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import models
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent, get_doc
from rest_framework import permissions, serializers

from console.numbers import BIG, INT32

INT16 = 2**15 - 1
# The largest amount a decimal field takes (console.numbers: 19 digits before the point).
LARGEST = float(10**19)

# A model column's range, by its class (checked in order: subclasses first).
COLUMN_RANGES: tuple[tuple[type[models.Field], tuple[float, float]], ...] = (  # type: ignore[type-arg]
    (models.BigAutoField, (1, BIG)),
    (models.AutoField, (1, INT32)),
    (models.PositiveSmallIntegerField, (0, INT16)),
    (models.PositiveBigIntegerField, (0, BIG)),
    (models.PositiveIntegerField, (0, INT32)),
    (models.SmallIntegerField, (-INT16 - 1, INT16)),
    (models.BigIntegerField, (-BIG, BIG)),
    (models.IntegerField, (-INT32 - 1, INT32)),
    (models.FloatField, (0, LARGEST)),  # GPU-seconds, weights: never negative here
    (models.ForeignKey, (1, BIG)),
)

_DETAIL = {
    "type": "object",
    "properties": {"detail": {"type": "string", "description": "Why, in a sentence."}},
    "required": ["detail"],
}
_MESSAGES: dict[str, Any] = {
    "type": "object",
    "description": "Messages per field or query parameter (``non_field_errors`` for the "
    "request as a whole); a nested field's messages nest under its name. A body that is "
    'not JSON answers ``{"detail": …}``.',
    "additionalProperties": {
        "anyOf": [
            {"type": "array", "items": {"type": "string"}},
            {"type": "object"},
            {"type": "string"},
        ]
    },
}
ERRORS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "400": ("ValidationError", "Refused: the fields or parameters named, with why.", _MESSAGES),
    "401": ("Unauthenticated", "No valid token or session.", _DETAIL),
    "403": ("Forbidden", "Signed in, but without the permission this needs.", _DETAIL),
    "404": ("NotFound", "No such object, or one you may not see; or no such page.", _DETAIL),
    "409": (
        "Conflict",
        "The change conflicts with what is stored (a name already taken).",
        {"anyOf": [_DETAIL, _MESSAGES]},
    ),
    "412": (
        "PreconditionFailed",
        "If-Match (or the body's version) names a version other than the stored one.",
        {"anyOf": [_DETAIL, _MESSAGES]},
    ),
}


def _column_range(field: serializers.Field) -> tuple[float, float] | None:  # type: ignore[type-arg]
    """The range of the model column a ModelSerializer field shows, if it has one."""
    meta = getattr(getattr(field, "parent", None), "Meta", None)
    model = getattr(meta, "model", None)
    source = getattr(field, "source", None)
    if model is None or not source or "." in source:
        return None
    try:
        column = model._meta.get_field(source)
    except FieldDoesNotExist:
        return None
    for kind, bounds in COLUMN_RANGES:
        if isinstance(column, kind):
            return bounds
    return None


def _ranged(schema: dict[str, Any], bounds: tuple[float, float], *, force: bool) -> None:
    """Give a number schema (or each number branch of an anyOf) its minimum and maximum."""
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") in ("integer", "number"):
            for key, value in zip(("minimum", "maximum"), bounds, strict=True):
                if force or key not in branch:
                    branch[key] = value


_VERBS = {
    "list": "List",
    "retrieve": "Read",
    "create": "Create",
    "update": "Replace",
    "partial_update": "Change",
    "destroy": "Delete",
    "get": "Read",
    "post": "Create",
    "put": "Replace",
    "patch": "Change",
    "delete": "Delete",
}


class TidepoolAutoSchema(AutoSchema):
    """AutoSchema with summaries, ranges and error bodies (see the module)."""

    def get_summary(self) -> str:
        """The first line of the docstring a view class gives its own method, else
        "<Verb> <resource>" ("List jobs", "Read job")."""
        declared = super().get_summary()
        if declared:
            return str(declared)
        action = getattr(self.view, "action", None) or self.method.lower()
        own = any(action in vars(cls) for cls in type(self.view).__mro__[:1])
        doc = get_doc(getattr(self.view, action, None))
        if doc and (own or action not in _VERBS):
            return doc.split("\n\n")[0].replace("\n", " ").rstrip(".")
        parts = [p for p in self.path.strip("/").split("/") if not p.startswith("{")]
        resource = parts[-1].replace("-", " ") if parts else "API"
        if "{" in self.path.rstrip("/").split("/")[-1]:  # one row: the singular
            resource = resource[:-1] if resource.endswith("s") else resource
        verb = _VERBS.get(action) or action.replace("_", " ").capitalize()
        return f"{verb} {resource}"

    def _map_serializer_field(
        self,
        field: Any,
        direction: Any,
        bypass_extensions: bool = False,
    ) -> Any:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)  # type: ignore[no-untyped-call]
        if not isinstance(schema, dict):
            return schema
        declared: dict[str, tuple[float, float]] = getattr(field.parent, "schema_ranges", {})
        if field.field_name in declared:
            _ranged(schema, declared[field.field_name], force=True)
        else:
            bounds = _column_range(field)
            if bounds is None and isinstance(field, serializers.IntegerField):
                bounds = (-INT32 - 1, INT32)
            if bounds is None and isinstance(field, serializers.FloatField):
                bounds = (0, LARGEST)  # GPU-seconds, weights: never negative
            if bounds is not None:
                _ranged(schema, bounds, force=False)
        return schema

    def _map_basic_serializer(self, serializer: Any, direction: Any) -> Any:
        """A serializer's ``schema_optional`` fields are shown only sometimes: not required."""
        schema = super()._map_basic_serializer(serializer, direction)  # type: ignore[no-untyped-call]
        optional = getattr(serializer, "schema_optional", ())
        if optional and "required" in schema:
            schema["required"] = [name for name in schema["required"] if name not in optional]
            if not schema["required"]:
                del schema["required"]
        return schema

    def _get_pagination_parameters(self) -> Any:
        parameters = super()._get_pagination_parameters()  # type: ignore[no-untyped-call]
        largest = getattr(self._get_paginator(), "max_page_size", None) or INT32  # type: ignore[no-untyped-call]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            if parameter["name"] == "page":
                schema.update(minimum=1, maximum=INT32)
                parameter["description"] = "Page number, from 1; past the last page: 404."
            elif parameter["name"] == "page_size":
                schema.update(minimum=1, maximum=largest)
        return parameters

    def _get_response_bodies(self, direction: Any = "response") -> Any:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code in self._error_codes():
            if code not in responses:
                name, description, schema = ERRORS[code]
                component = ResolvedComponent(  # type: ignore[no-untyped-call]
                    name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema
                )
                self.registry.register_on_missing(component)
                responses[code] = {
                    "description": description,
                    "content": {"application/json": {"schema": component.ref}},
                }
        return responses

    def _error_codes(self) -> list[str]:
        """The error statuses this operation may answer."""
        checks = self.view.get_permissions()
        anonymous = not checks or any(isinstance(p, permissions.AllowAny) for p in checks)
        writes = self.method not in permissions.SAFE_METHODS
        listed = self._is_list_view()
        codes = ["400"] if writes or listed else []  # a list refuses unknown filters
        if not anonymous:
            codes += ["401", "403"] if writes else ["401"]
        if "{" in self.path or listed:
            codes.append("404")  # an object out of sight, or a page past the last
        if writes and self._is_create_operation():
            codes.append("409")
        if any(getattr(p, "name", None) == "If-Match" for p in self.get_override_parameters()):
            codes.append("412")
        return codes


def postprocess(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Ranges the serializers do not make: a list page's ``count``."""
    for name, component in result.get("components", {}).get("schemas", {}).items():
        count = component.get("properties", {}).get("count")
        if name.startswith("Paginated") and count and count.get("type") == "integer":
            count.update(minimum=0, maximum=BIG)
    return result
