"""Serializers of the cluster API: they parse and shape; the services decide."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from cluster.choices import IdleScope
from cluster.models import Node, NodePool, ResourcePool
from cluster.node_import import FORMATS
from console.api import ref, whole


def by_name(queryset: Any, **kwargs: Any) -> Any:
    """A reference to a named row (node pool, resource pool, quota) by its name."""
    return ref("name", queryset=queryset, **kwargs)


class ResourcePoolSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A resource pool: root quotas take their guaranteed capacity from it."""

    idle_scope = serializers.ChoiceField(choices=IdleScope.choices, default=IdleScope.TREE)

    class Meta:
        model = ResourcePool
        fields = ["id", "name", "idle_scope", "description"]
        extra_kwargs: dict[str, Any] = {
            "name": {"validators": []},
            "description": {"required": False},
        }


class NodePoolSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A node pool of one GPU model, with its node and GPU counts."""

    resource_pool = by_name(ResourcePool.objects.all())
    gpu_model = serializers.CharField(max_length=100, required=False, allow_blank=True)
    label_selector = serializers.DictField(child=serializers.CharField(), required=False)
    nodes = serializers.IntegerField(source="node_count", read_only=True, default=0)
    gpus = serializers.IntegerField(source="gpu_count", read_only=True, default=0)

    class Meta:
        model = NodePool
        fields = ["id", "name", "resource_pool", "gpu_model", "label_selector", "nodes", "gpus"]
        extra_kwargs: dict[str, Any] = {"name": {"validators": []}}


class NodeSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A GPU node: gpus is a device count, cpu millicores, memory MiB."""

    node_pool = by_name(NodePool.objects.all())
    gpus = whole()
    cpu = whole(big=True, help_text="millicores")
    memory = whole(big=True, help_text="MiB")
    labels = serializers.DictField(child=serializers.CharField(), required=False)

    class Meta:
        model = Node
        fields = ["id", "name", "node_pool", "gpus", "cpu", "memory", "labels", "schedulable"]
        extra_kwargs: dict[str, Any] = {"name": {"validators": []}}


class NodeScheduleSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Cordon (false) or uncordon (true) a node."""

    schedulable = serializers.BooleanField()


class NodeImportSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A cluster spec (openb or native CSV, or YAML) as an uploaded file or as text."""

    resource_pool = by_name(
        ResourcePool.objects.all(),
        required=False,
        help_text='Defaults to "general", else the first resource pool.',
    )
    format = serializers.ChoiceField(choices=list(FORMATS), default="auto")
    file = serializers.FileField(required=False)
    text = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)


class NodeImportResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """What one import added."""

    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField()
    pools_created = serializers.ListField(child=serializers.CharField())
    pools = serializers.DictField(child=serializers.IntegerField())
