"""The quota API's reads of workloads: live usage per subtree and the scale preview.

quotas.api.views.QuotaViewSet answers everything about the quota tree itself; this subclass,
the one console/api_urls.py registers, adds what needs jobs, which quotas never imports.
"""

from __future__ import annotations

from collections.abc import Iterable

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from console import clock
from dashboard.selectors.quotas import attach_usage, quota_scale_preview
from quotas.api import serializers as s
from quotas.api import views as base
from quotas.models import Quota
from quotas.selectors import quota_amounts


class QuotaViewSet(base.QuotaViewSet):
    """The quota tree: amounts per node pool, settings, live usage, scale and rebalance."""

    def with_usage(self, quotas: Iterable[Quota]) -> None:
        """In Quota, borrowed and pending milli-GPU of each quota's subtree (3 queries)."""
        attach_usage(quotas)

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
