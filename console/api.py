"""Shared pieces of the REST API: authentication, errors, per-object scoping, If-Match/ETag.

Permissions are enforced here once (NetBox's ``BaseViewSet`` + ``restrict()``):

- Every API view builds the user's ``Access`` (workspaces.access) once, in ``initial``, and
  every check of the request reads it.
- ``WorkspaceScopedViewSet`` filters every queryset through the workspaces the user may view
  (``Access.restrict``), so anything else answers 404. Writes then need the workspace
  permission the viewset declares per action (403 without it).
- ``ClusterViewSet`` is for what platform admins manage (resource pools, node pools, nodes,
  quotas, usage): other users see an empty list and 404, and any write answers 403.
- Anonymous requests answer 401 (token authentication comes first, so DRF sends
  ``WWW-Authenticate: Token``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from django.core.cache.backends.locmem import LocMemCache
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Model, Q, QuerySet
from django.http import Http404
from django_filters import FilterSet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from redis.exceptions import RedisError
from rest_framework import exceptions, permissions, serializers, status
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
)
from rest_framework.filters import BaseFilterBackend
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView, exception_handler
from rest_framework.viewsets import GenericViewSet

from console.auth import CompiledTokenAuthentication
from console.errors import DomainError, NameTaken
from console.numbers import BIG, INT32, NumberError, parse_number, parse_whole
from console.units import MAX_GPUS, gpus_to_milli, milli_to_gpus
from quotas.services.quotas import StaleVersion
from workspaces.access import Access
from workspaces.models import Workspace

NON_FIELD = "non_field_errors"
log = logging.getLogger(__name__)


ID_REGEX = r"[0-9]{1,18}"


def is_id(value: str) -> bool:
    """A primary key as a URL or filter gives it: digits that fit a 64-bit integer."""
    return value.isdigit() and len(value) <= 18


# Errors ---------------------------------------------------------------------------------------
#
# A refused request answers with its errors keyed by the path of the field the client sent, in
# the shape of the request, as DRF answers a nested serializer: a quota scale sent as
# ``resources[1].min.gpu`` is answered ``{"resources": {"1": {"min": {"gpu": ["…"]}}}}``, a
# list item under its index as DRF keys it (LIST_SERIALIZER_ERRORS_AS_DICT, on by
# default), so the refused items alone. Services raise DomainError with
# their own field names ("min_gpu", "target"); each endpoint maps them to request paths in one
# place, its viewset's ``error_paths`` (APIMixin.error_path).

# A request path: object keys and list indexes, ("resources", 1, "min", "gpu").
Path = tuple[str | int, ...]
# How an endpoint finds the request path of a service field: a dotted path ("to",
# "resources.min.gpu" is not one: a list index needs a function), or a function of the view
# and the error.
PathRule = str | Callable[[Any, DomainError], Path]


def nested(path: Path, messages: list[str]) -> dict[str, Any]:
    """Errors at `path` in the request's shape, as DRF nests a serializer's errors (a list
    item under its index)."""
    value: Any = messages
    for step in reversed(path):
        value = {step: value}
    assert isinstance(value, dict)
    return value


def domain_error_data(error: DomainError, path: Path | None = None) -> dict[str, Any]:
    """A refused change as DRF shapes validation errors: {"gpu": ["…"]}, nested along `path`."""
    return nested(path or (error.field or NON_FIELD,), [error.message])


class MissingParent(exceptions.NotFound):
    """The parent a nested route names is out of sight; its message is the 404's."""


def described(key: str, value: str) -> str:
    """How a 404 names what was asked for: "with id 4" or "named 'bob'"."""
    if key in {"pk", "id"} or key.endswith("_id"):
        return f"with id {value}"
    return f"named {value!r}"


def not_found(message: str) -> Response:
    """The one 404 body: {"detail": "No job with id 4."}."""
    return Response({"detail": message}, status=status.HTTP_404_NOT_FOUND)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus: a DomainError answers 400 at the request path of its field (409
    for a name already taken); a
    stale version 412 under If-Match (or ``version``) with the current ETag; a missing object
    404 in the one vocabulary ("No job with id 4.")."""
    view = context.get("view")
    if isinstance(exc, StaleVersion):
        return stale_version_response(exc, context["request"])
    if isinstance(exc, DomainError):
        path = view.error_path(exc) if isinstance(view, APIMixin) else None
        code = (
            status.HTTP_409_CONFLICT if isinstance(exc, NameTaken) else status.HTTP_400_BAD_REQUEST
        )
        return Response(domain_error_data(exc, path), status=code)
    if isinstance(exc, Http404 | exceptions.NotFound) and isinstance(view, APIMixin):
        return not_found(view.missing(exc))
    return exception_handler(exc, context)


def stale_version_response(exc: StaleVersion, request: Request) -> Response:
    """412 under the precondition the client sent (If-Match, else the body's ``version``),
    with the current ETag in the headers and as ``etag`` in the body."""
    key = "If-Match" if request.headers.get("If-Match") is not None else "version"
    current = etag(exc.current_version)
    body = {key: [exc.message], "etag": current}
    response = Response(body, status=status.HTTP_412_PRECONDITION_FAILED)
    return with_etag(response, exc.current_version)


# If-Match / ETag ------------------------------------------------------------------------------

_ETAG = re.compile(r'^\s*(?:W/)?"?([0-9]{1,18})"?\s*$')


def etag(version: int) -> str:
    """The ETag of a versioned resource: its version, quoted."""
    return f'"{version}"'


def expected_version(request: Request, body_version: int | None = None) -> int | None:
    """The version the client edited: If-Match when sent (``*`` means any), else the body's."""
    header = request.headers.get("If-Match")
    if header is None:
        return body_version
    if header.strip() == "*":
        return None
    match = _ETAG.match(header)
    if match is None:
        raise exceptions.ValidationError(
            {"If-Match": [f"{header!r} is not a version; send the ETag you were given."]}
        )
    return int(match.group(1))


def with_etag(response: Response, version: int) -> Response:
    """Set the response's ETag to the resource's version."""
    response["ETag"] = etag(version)
    return response


IF_MATCH = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description='The quota\'s version as its ETag (e.g. "3"); a stale one answers 412.',
)


def missing_named(noun: str, where: str = "") -> dict[str, str]:
    """The error messages of a reference to a row by name, in the 404s' vocabulary:
    "No quota named 'x'."."""
    return {"does_not_exist": f"No {noun} named {{value!r}}{where}."}


def ref(slug_field: str = "name", **kwargs: Any) -> Any:
    """A reference to a named row (quota, node pool, workspace, user) by its unique name."""
    queryset = kwargs.get("queryset")
    if queryset is not None:
        noun = str(queryset.model._meta.verbose_name)
        kwargs["error_messages"] = {**missing_named(noun), **kwargs.get("error_messages", {})}
    return serializers.SlugRelatedField(slug_field=slug_field, **kwargs)


# Fields -----------------------------------------------------------------------------------------


@extend_schema_field(
    {
        "type": "number",
        "minimum": 0,
        "maximum": MAX_GPUS,
        "example": 48,
        "description": "GPUs, in steps of 1/1000 (held as milli-GPUs).",
    }
)
class GPUField(serializers.Field):  # type: ignore[type-arg]
    """GPUs as a decimal number (0.5 is GPU sharing), held internally as milli-GPUs."""

    def to_internal_value(self, data: Any) -> int:
        """Refuse what is not a number of GPUs with the domain's message."""
        try:
            return gpus_to_milli(data)
        except DomainError as error:
            raise serializers.ValidationError(error.message) from None

    def to_representation(self, value: int) -> float | int:
        """48000 → 48, 500 → 0.5."""
        text = milli_to_gpus(int(value))
        return float(text) if "." in text else int(text)


@extend_schema_field(
    {
        "anyOf": [
            {"type": "number", "minimum": 0, "maximum": 1},
            {"type": "integer", "minimum": 0, "maximum": MAX_GPUS},
        ],
        "example": 0.5,
        "description": "GPUs per replica: a fraction of one GPU (GPU sharing, in steps of "
        "1/1000) or a whole number.",
    }
)
class ReplicaGPUField(GPUField):
    """GPUs per replica: a fraction up to 1, or whole GPUs (the submit services' rule)."""


class FiniteFloatField(serializers.FloatField):
    """A float that is a real number of bounded digits (parse_number; no inf or nan)."""

    def to_internal_value(self, data: Any) -> float:
        """Parse through parse_number, then make it a float."""
        try:
            return float(parse_number(data))
        except NumberError as error:
            raise serializers.ValidationError(str(error)) from None


class WholeField(serializers.IntegerField):
    """A whole number parsed by parse_whole; min_value and max_value as IntegerField's."""

    def to_internal_value(self, data: Any) -> int:
        """Parse through parse_whole."""
        try:
            return parse_whole(data)
        except NumberError as error:
            raise serializers.ValidationError(str(error)) from None


def whole(*, big: bool = False, **kwargs: Any) -> serializers.IntegerField:
    """A whole number of 0 or more that fits its column (32-bit, or 64-bit when big)."""
    kwargs.setdefault("min_value", 0)
    kwargs.setdefault("max_value", BIG if big else INT32)
    return WholeField(**kwargs)


# Authentication, throttling, pagination, filters ----------------------------------------------


class TokenRateThrottle(SimpleRateThrottle):
    """At most 20 token requests a minute from one client address."""

    scope = "token"
    rate = "20/min"
    # Counts in this process alone while the shared cache (Redis) is unreachable.
    fallback = LocMemCache("token-throttle", {})

    def get_cache_key(self, request: Request, view: APIView) -> str:
        """One bucket per client address."""
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def allow_request(self, request: Request, view: APIView) -> bool:
        """Count in the shared cache, or in this process while Redis is down (never a 500)."""
        try:
            return super().allow_request(request, view)
        except RedisError:
            log.warning("token throttle: the shared cache is unreachable; counting locally")
            self.cache = self.fallback
            return super().allow_request(request, view)


class Pagination(PageNumberPagination):
    """Pages of 50 (``page_size`` up to 1000): ``count``, ``next``, ``previous``, ``results``."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 1000


# What a list takes besides its filters.
LIST_PARAMS = frozenset({"page", "page_size", "format", "ordering"})


def refuse_unknown(request: Request, view: APIView, known: Sequence[str]) -> None:
    """400 for a list's query parameter that is neither a filter nor pagination or format.

    A filter that is silently ignored (a misspelt one, one the API does not have) answers
    the whole list as if it had matched.
    """
    if getattr(view, "action", None) != "list":  # get_object filters too; its URL is its own
        return
    extra: Sequence[str] = getattr(view, "list_params", ())
    allowed = [*known, *extra, *sorted(LIST_PARAMS)]
    unknown = [p for p in request.query_params if p not in allowed]
    if unknown:
        message = f"Not a filter of this list; the allowed parameters are {', '.join(allowed)}."
        raise exceptions.ValidationError({param: [message] for param in unknown})


class FilterSetBackend(DjangoFilterBackend):  # type: ignore[misc]
    """django-filter's backend, strict: an unknown parameter or a value a filter cannot take
    answers 400 naming the parameter (and its allowed values), never the unfiltered list."""

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: APIView) -> Any:
        """The view's FilterSet over the query string, validated (400 when refused)."""
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is None:
            return queryset
        return validated_filterset(request, view, filterset_class, queryset).qs


def validated_filterset(
    request: Request, view: APIView, filterset_class: type[FilterSet], queryset: QuerySet[Any]
) -> FilterSet:
    """`filterset_class` bound to the query string over `queryset`, its form valid.

    400 for an unknown parameter (``refuse_unknown``) or a value a filter refuses, each
    message on its parameter.
    """
    refuse_unknown(request, view, list(filterset_class.base_filters))
    filterset = filterset_class(request.query_params, queryset=queryset)
    form = filterset.form
    if not form.is_valid():
        raise exceptions.ValidationError(
            {param: [str(m) for m in messages] for param, messages in form.errors.items()}
        )
    return filterset


def given_filters(filterset: FilterSet) -> dict[str, Any]:
    """A valid filterset's cleaned values that filter something, in declared order."""
    cleaned = filterset.form.cleaned_data
    return {
        name: value
        for name in filterset.filters
        if (value := cleaned.get(name)) not in (None, "", [], ())
    }


class FieldFilterBackend(BaseFilterBackend):
    """Filter lists by the query parameters a viewset declares in ``filter_fields``.

    ``filter_fields`` maps a parameter to an ORM lookup, or to several tried with OR
    (a quota is named by name or id).
    """

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: APIView) -> Any:
        """Apply every declared parameter present in the query string."""
        fields: Mapping[str, str | tuple[str, ...]] = getattr(view, "filter_fields", {})
        refuse_unknown(request, view, list(fields))
        return self.apply(queryset, fields, self.given(request, fields))

    @staticmethod
    def given(request: Request, fields: Mapping[str, Any]) -> dict[str, str]:
        """The declared parameters the query string gives a value, in declared order."""
        params = request.query_params
        return {p: value for p in fields if (value := params.get(p)) is not None and value != ""}

    @staticmethod
    def apply(
        queryset: QuerySet[Any],
        fields: Mapping[str, str | tuple[str, ...]],
        given: Mapping[str, str],
    ) -> QuerySet[Any]:
        """Only the rows matching every given parameter (400 naming one that cannot be)."""
        for param, value in given.items():
            lookups = fields[param]
            condition = Q()
            for lookup in (lookups,) if isinstance(lookups, str) else lookups:
                if lookup.endswith("_id") and not is_id(value):
                    continue
                condition |= Q(**{lookup: value})
            try:
                queryset = queryset.filter(condition) if condition else queryset.none()
            except (DjangoValidationError, ValueError, TypeError):
                message = f"{value!r} is not valid here."
                raise exceptions.ValidationError({param: [message]}) from None
        return queryset

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        """Describe the parameters for the OpenAPI schema."""
        fields: Mapping[str, Any] = getattr(view, "filter_fields", {})
        help_text: Mapping[str, str] = getattr(view, "filter_help", {})
        return [
            {
                "name": param,
                "required": False,
                "in": "query",
                "description": help_text.get(param, f"Only rows whose {param} is this."),
                "schema": {"type": "string"},
            }
            for param in fields
        ]


class APIMixin:
    """What every API view shares: token first (401 for anonymous), the user's ``access``
    built once per request, domain error handling."""

    authentication_classes: Sequence[type[BaseAuthentication]] = (
        CompiledTokenAuthentication,  # the same class as the default, for one OpenAPI scheme
        SessionAuthentication,
    )
    access: Access
    # Per action, the request path of each service field that the request names otherwise
    # (any other field is its own path): {"rebalance": {"target": "to"}}.
    error_paths: ClassVar[Mapping[str, Mapping[str, PathRule]]] = {}
    # What a missing object is called in a 404 ("No job with id 4."); a nested route's parent
    # in parent_noun.
    noun: ClassVar[str] = "object"

    def error_path(self, error: DomainError) -> Path:
        """The request path of a refused service field, through this action's error_paths."""
        field = error.field or NON_FIELD
        rule = self.error_paths.get(getattr(self, "action", None) or "", {}).get(field, field)
        if callable(rule):
            return rule(self, error)
        return tuple(rule.split("."))

    def missing(self, error: Exception) -> str:
        """The 404 message for the object the URL names: "No job with id 4."."""
        if isinstance(error, MissingParent):
            return str(error)
        kwargs: Mapping[str, Any] = getattr(self, "kwargs", {})
        key = str(getattr(self, "lookup_url_kwarg", None) or getattr(self, "lookup_field", "pk"))
        value = kwargs.get(key)
        if value is None:
            return f"No {self.noun} here."
        return f"No {self.noun} {described(key, str(value))}{self.missing_where()}."

    def missing_where(self) -> str:
        """Where the object was looked for, for a 404 message ("" or " in workspace_b")."""
        return ""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """Authenticate, build the user's Access (it reads nothing yet), then DRF's checks."""
        self.perform_authentication(request)  # type: ignore[attr-defined]
        self.access = Access(request.user)
        super().initial(request, *args, **kwargs)  # type: ignore[misc]

    def get_exception_handler(self) -> Any:
        """Answer DomainError with 400 on its field and StaleVersion with 412."""
        return api_exception_handler


# Cluster resources ------------------------------------------------------------------------------


class PlatformAdminWrites(permissions.BasePermission):
    """Reads for any signed-in user (scoped by the queryset); writes for platform admins."""

    message = "Only platform admins may change cluster resources."

    def has_permission(self, request: Request, view: APIView) -> bool:
        """Signed in; and a platform admin unless the request is a read."""
        if not (request.user and request.user.is_authenticated):
            return False
        read_actions: frozenset[str] = getattr(view, "read_actions", frozenset())
        if request.method in permissions.SAFE_METHODS or getattr(view, "action", None) in (
            read_actions
        ):
            return True
        assert isinstance(view, APIMixin)
        return view.access.platform_admin


class ClusterViewSet(APIMixin, GenericViewSet):  # type: ignore[type-arg]
    """Resource pools, node pools, nodes, quotas, usage: only platform admins see them."""

    permission_classes = [PlatformAdminWrites]
    pagination_class = Pagination
    lookup_value_regex = ID_REGEX
    filter_backends = [FieldFilterBackend]
    filter_fields: ClassVar[Mapping[str, str | tuple[str, ...]]] = {}
    # POST actions that only read (a preview): allowed to non-admins, who find nothing anyway.
    read_actions: ClassVar[frozenset[str]] = frozenset()

    def get_queryset(self) -> QuerySet[Any]:
        """Everything for platform admins, nothing for anyone else."""
        queryset: QuerySet[Any] = super().get_queryset()
        if not self.access.platform_admin:
            return queryset.none()
        return queryset


# Workspace-scoped resources -------------------------------------------------------------------


class WorkspacePermission(permissions.BasePermission):
    """Signed in; platform-admin-only actions; the workspace permission of each write."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        """Refuse admin-only actions to others; check a nested parent's workspace."""
        if not (request.user and request.user.is_authenticated):
            return False
        assert isinstance(view, WorkspaceScopedViewSet)
        action = view.action or ""
        parent = view.parent_workspace()  # 404 when the URL names a workspace out of sight
        if action in view.admin_actions and not view.access.platform_admin:
            raise exceptions.PermissionDenied("Only platform admins may do this.")
        perm = view.permission_for(action)
        if parent is not None and perm:
            view.access.require(perm, parent)
        return True

    def has_object_permission(self, request: Request, view: APIView, obj: Model) -> bool:
        """The workspace permission the action needs, on the object's workspace."""
        assert isinstance(view, WorkspaceScopedViewSet)
        perm = view.permission_for(view.action or "")
        if not perm:
            return True
        view.access.require(perm, view.workspace_of(obj))
        return True


class WorkspaceScopedViewSet(APIMixin, GenericViewSet):  # type: ignore[type-arg]
    """A viewset whose rows belong to workspaces; concrete viewsets declare:

    - ``workspace_path``: the ORM path from a row to its workspace (``""`` for Workspace);
    - ``action_permissions``: workspace permission per action beyond viewing it
      (``"*"`` for every other write);
    - ``admin_actions``: actions only platform admins may take;
    - ``parent_kwarg``/``parent_path``: for nested routes, the URL kwarg of the parent and
      the ORM path from a row to that parent's pk; ``parent_queryset`` the rows a parent may
      be, ``parent_workspace_path`` the path from a parent to its workspace.
    """

    permission_classes = [WorkspacePermission]
    pagination_class = Pagination
    lookup_value_regex = ID_REGEX
    filter_backends = [FieldFilterBackend]
    filter_fields: ClassVar[Mapping[str, str | tuple[str, ...]]] = {}
    workspace_path: ClassVar[str] = "workspace"
    action_permissions: ClassVar[Mapping[str, str]] = {}
    admin_actions: ClassVar[frozenset[str]] = frozenset()
    parent_kwarg: ClassVar[str | None] = None
    parent_path: ClassVar[str] = ""
    # How the parent of a nested route reaches its workspace ("" when the parent is one).
    parent_workspace_path: ClassVar[str] = ""
    parent_queryset: ClassVar[QuerySet[Any] | None] = None
    parent_noun: ClassVar[str] = "workspace"

    def missing_where(self) -> str:
        """ " in workspace_b" under a workspace's route, " in service chat-api" under a
        service's."""
        if self.parent_kwarg is None or self.parent_kwarg not in self.kwargs:
            return ""
        name = getattr(self.parent_object(), "name", "")
        # Workspaces are named bare ("in workspace_b"), as the CLI names them.
        where = "" if self.parent_noun == "workspace" else f"{self.parent_noun} "
        return f" in {where}{name}"

    def permission_for(self, action: str) -> str | None:
        """The workspace permission an action needs (None for reads)."""
        if action in self.action_permissions:
            return self.action_permissions[action]
        if action in {"list", "retrieve"} or self.request.method in permissions.SAFE_METHODS:
            return None
        return self.action_permissions.get("*")

    def get_queryset(self) -> QuerySet[Any]:
        """The declared queryset, through the user's workspaces (and the URL's parent)."""
        queryset = self.access.restrict(super().get_queryset(), self.workspace_path)
        if self.parent_kwarg and self.parent_kwarg in self.kwargs:
            queryset = queryset.filter(**{self.parent_path: self.kwargs[self.parent_kwarg]})
        return queryset

    def parent_object(self) -> Model | None:
        """The parent row a nested route names, through the user's workspaces (404 if unseen)."""
        if self.parent_kwarg is None or self.parent_queryset is None:
            return None
        if not hasattr(self, "_parent"):
            raw = str(self.kwargs.get(self.parent_kwarg, ""))
            parents = self.access.restrict(self.parent_queryset.all(), self.parent_workspace_path)
            parent = parents.filter(pk=int(raw)).first() if is_id(raw) else None
            if parent is None:
                raise MissingParent(f"No {self.parent_noun} with id {raw}.")
            self._parent: Model = parent
        return self._parent

    def parent_workspace(self) -> Workspace | None:
        """The workspace of a nested route's parent."""
        parent = self.parent_object()
        if parent is None:
            return None
        return self._follow(parent, self.parent_workspace_path)

    def workspace_of(self, obj: Model) -> Workspace:
        """The workspace a row belongs to."""
        return self._follow(obj, self.workspace_path)

    @staticmethod
    def _follow(obj: Model, path: str) -> Workspace:
        target: Any = obj
        for part in path.split("__") if path else []:
            target = getattr(target, part)
        assert isinstance(target, Workspace)
        return target
