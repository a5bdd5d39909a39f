"""API of the quota tree (resource pools, node pools and nodes are in cluster/api/views.py).

Only platform admins see these: other users get an empty list and 404, and 403 on writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from cluster.models import NodePool
from console import clock
from console.api import (
    IF_MATCH,
    NON_FIELD,
    ClusterViewSet,
    MissingParent,
    Path,
    PathRule,
    expected_version,
    with_etag,
)
from console.errors import DomainError
from quotas.amounts import RESOURCES
from quotas.api import serializers as s
from quotas.api.serializers import AMOUNT_KEYS
from quotas.models import CalendarRule, Quota, QuotaAudit
from quotas.selectors import quota_amounts, quotas_with_amounts
from quotas.services.calendar import (
    calendar_rule_create,
    calendar_rule_delete,
    calendar_rule_update,
)
from quotas.services.quotas import (
    quota_create,
    quota_delete,
    quota_rebalance,
    quota_scale_outcome,
    quota_set_child_preemption,
    quota_update,
)


def _resource_path(view: Any, error: DomainError) -> Path:
    """Where in ``resources`` an amount error belongs: the row the client sent for its node
    pool (``resources[i].min.gpu``), else ``resources`` itself."""
    pool = getattr(error, "node_pool", None)
    data = view.request.data
    rows = data.get("resources") if isinstance(data, Mapping) else None
    index = None
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        if isinstance(row, Mapping) and pool is not None and row.get("node_pool") == pool:
            index = i  # the last row for a pool is the one whose values win
    if index is None:
        if error.field == "allowed_node_pools":
            return ("allowed_node_pools",)
        return ("resources",)
    field = error.field or ""
    bound, _, resource = field.partition("_")
    if bound in {"min", "max"} and resource in RESOURCES:
        return ("resources", index, bound, resource)
    return ("resources", index, "min")  # a min in a pool the quota may not use


# Service fields of the quota amounts as the scale and create bodies send them.
RESOURCE_PATHS: dict[str, PathRule] = {
    **{key: _resource_path for key in AMOUNT_KEYS},
    "allowed_node_pools": _resource_path,
}
# A rebalance sends the amounts it moves as gpu, cpu and memory.
MOVED_PATHS: dict[str, PathRule] = {f"{b}_{r}": r for b in ("min", "max") for r in RESOURCES}


TREE = OpenApiParameter(
    "view",
    str,
    enum=["tree"],
    required=False,
    description="tree: the roots, each with its children nested.",
)


class QuotaViewSet(ClusterViewSet):
    """The quota tree: amounts per node pool, settings, live usage, scale and rebalance."""

    queryset = Quota.objects.order_by("name")
    serializer_class = s.QuotaSerializer
    filter_fields = {
        "name": "name",
        "parent": ("parent__name", "parent_id"),
        "resource_pool": "resource_pool__name",
    }
    read_actions = frozenset({"preview"})
    noun = "quota"
    list_params = ("view",)  # ?view=tree
    error_paths = {
        "create": RESOURCE_PATHS,
        "scale": RESOURCE_PATHS,
        "preview": RESOURCE_PATHS,
        "rebalance": {**MOVED_PATHS, "source": "from", "target": "to"},
        "destroy": {"quota": NON_FIELD},
    }

    def with_usage(self, quotas: Iterable[Quota]) -> None:
        """Set each quota's live usage for the serializer.

        Usage is read from workloads and pods, which quotas does not import: the viewset the
        router serves is dashboard.api.views.QuotaViewSet, which fills this in.
        """
        raise NotImplementedError("register dashboard.api.views.QuotaViewSet")

    def get_queryset(self) -> QuerySet[Any]:
        """Amounts per node pool come with the page."""
        return quotas_with_amounts(super().get_queryset())

    def get_object(self) -> Quota:
        """The URL's quota with its subtree's live usage."""
        quota: Quota = super().get_object()
        self.with_usage([quota])
        return quota

    def _fresh(self, *quotas: Quota) -> list[Quota]:
        """The quotas as stored now, in the order given, with their subtrees' live usage."""
        by_pk = self.get_queryset().in_bulk([q.pk for q in quotas])
        fresh = [by_pk[q.pk] for q in quotas]
        self.with_usage(fresh)
        return fresh

    def _answer(self, quota: Quota, code: int = status.HTTP_200_OK) -> Response:
        """The quota as stored now, with its version as ETag."""
        (fresh,) = self._fresh(quota)
        return with_etag(Response(s.QuotaSerializer(fresh).data, status=code), fresh.version)

    @extend_schema(parameters=[TREE], responses=s.QuotaTreeSerializer(many=True))
    def list(self, request: Request) -> Response:
        """Quotas by name with ``parent``; ``?view=tree`` nests children under their parents."""
        queryset = self.filter_queryset(self.get_queryset())
        if request.query_params.get("view") == "tree":
            quotas = list(queryset)
            self.with_usage(quotas)
            ids = {q.pk for q in quotas}
            children: dict[int, list[Quota]] = {}
            for q in quotas:
                if q.parent_id in ids:
                    children.setdefault(q.parent_id, []).append(q)
            roots = [q for q in quotas if q.parent_id not in ids]
            context = {**self.get_serializer_context(), "children": children}
            results = s.QuotaTreeSerializer(roots, many=True, context=context).data
            return Response(
                {"count": len(roots), "next": None, "previous": None, "results": results}
            )
        page = self.paginate_queryset(queryset) or []
        self.with_usage(page)
        return self.get_paginated_response(s.QuotaSerializer(page, many=True).data)

    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        """One quota, its version as ETag."""
        quota = self.get_object()
        return with_etag(Response(s.QuotaSerializer(quota).data), quota.version)

    @extend_schema(request=s.QuotaCreateSerializer, responses={201: s.QuotaSerializer})
    def create(self, request: Request) -> Response:
        """Add a Resource Quota, or a child-level one with ``parent``."""
        data = s.QuotaCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        rows = values.pop("resources", [])
        quota = quota_create(actor=request.user, resources=s.merged_amounts({}, rows), **values)
        return self._answer(quota, status.HTTP_201_CREATED)

    @extend_schema(
        request=s.QuotaUpdateSerializer, responses=s.QuotaSerializer, parameters=[IF_MATCH]
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Change settings; If-Match (or ``version``) guards against a lost update (412)."""
        quota = self.get_object()
        data = s.QuotaUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        version = expected_version(request, values.pop("version", None))
        toggle = values.pop("child_preemption", None)
        with transaction.atomic():
            if values or toggle is None:
                quota = quota_update(
                    actor=request.user,
                    quota=quota,
                    expected_version=version,
                    clear_weight="over_quota_weight" in values
                    and values["over_quota_weight"] is None,
                    **values,
                )
                version = quota.version
            if toggle is not None:
                quota = quota_set_child_preemption(
                    actor=request.user, quota=quota, enabled=toggle, expected_version=version
                )
        return self._answer(quota)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        """Delete a quota with no children and no bound workspaces."""
        quota_delete(actor=request.user, quota=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=s.ScaleSerializer, responses=s.ScaleResultSerializer, parameters=[IF_MATCH]
    )
    @action(detail=True, methods=["post"])
    def scale(self, request: Request, pk: str | None = None) -> Response:
        """Change min and max; usage over the new min becomes Not in Quota (412 if stale)."""
        quota = self.get_object()
        data = s.ScaleSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        resources = s.merged_amounts(quota_amounts(quota), data.validated_data["resources"])
        outcome = quota_scale_outcome(
            actor=request.user,
            quota=quota,
            resources=resources,
            expected_version=expected_version(request, data.validated_data.get("version")),
        )
        (fresh,) = self._fresh(outcome.quota)
        body = {**s.QuotaSerializer(fresh).data, "changed": outcome.changed}
        return with_etag(Response(body), fresh.version)

    @extend_schema(request=s.RebalanceSerializer, responses=s.RebalanceResultSerializer)
    @action(detail=False, methods=["post"])
    def rebalance(self, request: Request) -> Response:
        """Move guaranteed GPUs (or CPU, memory) from one quota to a sibling, atomically."""
        data = s.RebalanceSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        source: Quota = values["from"]
        node_pool = values.get("node_pool")
        if node_pool is None:
            pools = list(NodePool.objects.filter(resource_pool_id=source.resource_pool_id)[:2])
            if len(pools) != 1:
                raise DomainError(
                    f"Name the node pool: resource pool {source.resource_pool.name} has "
                    f"{'several' if pools else 'none'}.",
                    field="node_pool",
                )
            node_pool = pools[0]
        source, target = quota_rebalance(
            actor=request.user,
            source=source,
            target=values["to"],
            node_pool=node_pool,
            gpu=values["gpu"],
            cpu=values["cpu"],
            memory=values["memory"],
        )
        source, target = self._fresh(source, target)
        body = {
            "source": s.QuotaSerializer(source).data,
            "target": s.QuotaSerializer(target).data,
        }
        return Response(body)


class QuotaAuditViewSet(mixins.ListModelMixin, ClusterViewSet):
    """A quota's audit log: who changed it, when, before and after; newest first."""

    queryset = QuotaAudit.objects.select_related("actor")
    serializer_class = s.QuotaAuditSerializer
    noun = "audit record"

    def get_queryset(self) -> QuerySet[Any]:
        """The records of the URL's quota, which must be one the user may see (else 404)."""
        quota_id = str(self.kwargs.get("quota_id", ""))
        visible = self.access.platform_admin and quota_id.isdigit()
        if not visible or not Quota.objects.filter(pk=int(quota_id)).exists():
            raise MissingParent(f"No quota with id {quota_id}.")
        return super().get_queryset().filter(quota_id=int(quota_id))


class CalendarRuleViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    ClusterViewSet,
):
    """The quota calendar (``/quota-calendar/``): scheduled rebalance, scale or lend-idle."""

    queryset = CalendarRule.objects.select_related("quota", "target", "node_pool").order_by("name")
    serializer_class = s.CalendarRuleSerializer
    filter_fields = {"name": "name", "quota": ("quota__name", "quota_id"), "action": "action"}
    noun = "calendar rule"
    error_paths = {
        "create": {"target": "to"},
        "partial_update": {"target": "to"},
    }

    def perform_create(self, serializer: Any) -> None:
        """calendar_rule_create decides."""
        serializer.instance = calendar_rule_create(now=clock.now(), **serializer.validated_data)

    @extend_schema(
        request=s.CalendarRuleSerializer(partial=True), responses=s.CalendarRuleSerializer
    )
    def partial_update(self, request: Request, **kwargs: Any) -> Response:
        """Change any of the rule's fields (a new schedule does not fire retroactively)."""
        rule = self.get_object()
        data = s.CalendarRuleSerializer(rule, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        rule = calendar_rule_update(rule=rule, now=clock.now(), **data.validated_data)
        return Response(s.CalendarRuleSerializer(rule).data)

    def perform_destroy(self, instance: CalendarRule) -> None:
        """calendar_rule_delete removes the rule and its beat task."""
        calendar_rule_delete(rule=instance)
