"""The cluster API: resource pools, node pools and nodes, with node import."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Sum
from django.db.models.functions import Coalesce
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from cluster.api import serializers as s
from cluster.models import Node, NodePool, ResourcePool
from cluster.services import (
    node_create,
    node_pool_create,
    node_schedulable_set,
    nodes_import,
    resource_pool_create,
)
from console.api import ClusterViewSet
from console.errors import DomainError
from console.parsers import JSONParser


class ResourcePoolViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, ClusterViewSet
):
    """Resource pools: slices of the cluster that root quotas take capacity from."""

    queryset = ResourcePool.objects.order_by("name")
    serializer_class = s.ResourcePoolSerializer
    noun = "resource pool"
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
    noun = "node pool"
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
    noun = "node"
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
