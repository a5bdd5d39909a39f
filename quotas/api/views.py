"""API of what platform admins manage: resource pools, node pools, nodes and the quota tree.

Only platform admins see these: other users get an empty list and 404, and 403 on writes.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from console.api import IF_MATCH, ClusterViewSet, expected_version, with_etag
from console.errors import DomainError
from console.parsers import JSONParser
from jobs import clock
from quotas.api import serializers as s
from quotas.api.queries import attach_usage, quotas_with_amounts
from quotas.models import Node, NodePool, Quota, QuotaAudit, ResourcePool
from quotas.selectors import quota_amounts, quota_scale_preview
from quotas.services.nodes import (
    node_create,
    node_pool_create,
    node_schedulable_set,
    nodes_import,
    resource_pool_create,
)
from quotas.services.quotas import (
    quota_create,
    quota_delete,
    quota_rebalance,
    quota_scale,
    quota_set_child_preemption,
    quota_update,
)


class ResourcePoolViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, ClusterViewSet
):
    """Resource pools: slices of the cluster that root quotas take capacity from."""

    queryset = ResourcePool.objects.order_by("name")
    serializer_class = s.ResourcePoolSerializer
    filter_fields = {"name": "name"}

    def perform_create(self, serializer: Any) -> None:
        """resource_pool_create decides."""
        serializer.instance = resource_pool_create(**serializer.validated_data)


class NodePoolViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, ClusterViewSet
):
    """Node pools: nodes of one GPU model."""

    queryset = (
        NodePool.objects.select_related("resource_pool")
        .annotate(node_count=Count("nodes"), gpu_count=Coalesce(Sum("nodes__gpus"), 0))
        .order_by("name")
    )
    serializer_class = s.NodePoolSerializer
    filter_fields = {"name": "name", "resource_pool": "resource_pool__name"}

    def perform_create(self, serializer: Any) -> None:
        """node_pool_create decides."""
        data = serializer.validated_data
        created = node_pool_create(
            resource_pool=data["resource_pool"],
            name=data["name"],
            gpu_model=data.get("gpu_model") or "",
            label_selector=data.get("label_selector"),
        )
        serializer.instance = self.get_queryset().get(pk=created.pk)


class NodeViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, ClusterViewSet
):
    """GPU nodes; import many at once from a CSV or YAML cluster spec."""

    queryset = Node.objects.select_related("node_pool").order_by("name")
    serializer_class = s.NodeSerializer
    filter_fields = {"name": "name", "node_pool": "node_pool__name"}

    def perform_create(self, serializer: Any) -> None:
        """node_create decides."""
        serializer.instance = node_create(**serializer.validated_data)

    @extend_schema(request=s.NodeScheduleSerializer, responses=s.NodeSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Cordon or uncordon a node."""
        node = self.get_object()
        data = s.NodeScheduleSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        node = node_schedulable_set(node=node, schedulable=data.validated_data["schedulable"])
        return Response(s.NodeSerializer(node).data)

    @extend_schema(
        request={
            "multipart/form-data": s.NodeImportSerializer,
            "application/json": s.NodeImportSerializer,
        },
        responses={201: s.NodeImportResultSerializer},
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        parser_classes=[MultiPartParser, FormParser, JSONParser],
    )
    def import_nodes(self, request: Request) -> Response:
        """Import every node of a cluster spec, or none: a refusal names the line."""
        data = s.NodeImportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        upload = values.get("file")
        if upload is not None:
            try:
                text, filename = upload.read().decode("utf-8"), upload.name or ""
            except UnicodeDecodeError:
                raise DomainError("The file is not UTF-8 text.", field="file") from None
        elif (values.get("text") or "").strip():
            text, filename = values["text"], ""
        else:
            raise DomainError("Send a CSV or YAML file, or its text.", field="file")
        pool = values.get("resource_pool") or (
            ResourcePool.objects.filter(name="general").first() or ResourcePool.objects.first()
        )
        if pool is None:
            raise DomainError("Create a resource pool first.", field="resource_pool")
        result = nodes_import(
            resource_pool=pool, text=text, fmt=values["format"], filename=filename
        )
        body = s.NodeImportResultSerializer(result).data
        return Response(body, status=status.HTTP_201_CREATED)


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
    list_params = ("view",)  # ?view=tree

    def get_queryset(self) -> QuerySet[Any]:
        """Amounts per node pool come with the page."""
        return quotas_with_amounts(super().get_queryset())

    def get_object(self) -> Quota:
        """The URL's quota with its subtree's live usage."""
        quota: Quota = super().get_object()
        attach_usage([quota])
        return quota

    def _fresh(self, *quotas: Quota) -> list[Quota]:
        """The quotas as stored now, in the order given, with their subtrees' live usage."""
        by_pk = self.get_queryset().in_bulk([q.pk for q in quotas])
        fresh = [by_pk[q.pk] for q in quotas]
        attach_usage(fresh)
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
            attach_usage(quotas)
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
        attach_usage(page)
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

    @extend_schema(request=s.ScaleSerializer, responses=s.QuotaSerializer, parameters=[IF_MATCH])
    @action(detail=True, methods=["post"])
    def scale(self, request: Request, pk: str | None = None) -> Response:
        """Change min and max; usage over the new min becomes Not in Quota (412 if stale)."""
        quota = self.get_object()
        data = s.ScaleSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        resources = s.merged_amounts(quota_amounts(quota), data.validated_data["resources"])
        quota = quota_scale(
            actor=request.user,
            quota=quota,
            resources=resources,
            expected_version=expected_version(request, data.validated_data.get("version")),
        )
        return self._answer(quota)

    @extend_schema(request=s.ScaleSerializer, responses=s.ScalePreviewSerializer)
    @action(detail=True, methods=["post"], url_path="scale/preview")
    def preview(self, request: Request, pk: str | None = None) -> Response:
        """The running workloads this scale would make Not in Quota; nothing is changed."""
        quota = self.get_object()
        data = s.ScaleSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        resources = s.merged_amounts(quota_amounts(quota), data.validated_data["resources"])
        result = quota_scale_preview(
            actor=request.user, quota=quota, resources=resources, now=clock.now()
        )
        return Response(s.ScalePreviewSerializer(result).data)

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

    def get_queryset(self) -> QuerySet[Any]:
        """The records of the URL's quota, which must be one the user may see (else 404)."""
        quota_id = str(self.kwargs.get("quota_id", ""))
        visible = self.access.platform_admin and quota_id.isdigit()
        if not visible or not Quota.objects.filter(pk=int(quota_id)).exists():
            raise Http404("No such quota.")
        return super().get_queryset().filter(quota_id=int(quota_id))
