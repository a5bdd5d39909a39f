"""POST /api/v1/what-if/ starts a replay; GET /api/v1/what-if/{id}/ is the resource to poll."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from console import clock
from console.api import ClusterViewSet
from whatif.api import serializers as s
from whatif.models import WhatIf
from whatif.selectors import whatif_list
from whatif.services import whatif_create


class WhatIfViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ClusterViewSet):
    """What-if replays: platform admins only (others see none and may start none)."""

    queryset = WhatIf.objects.all()
    serializer_class = s.WhatIfSerializer
    noun = "what-if"

    def get_queryset(self) -> QuerySet[Any]:
        """The list without results; one replay with its result."""
        if not self.access.platform_admin:
            return WhatIf.objects.none()
        return (
            whatif_list() if self.action == "list" else WhatIf.objects.select_related("created_by")
        )

    def get_serializer_class(self) -> type[BaseSerializer[Any]]:
        """The list leaves the results out."""
        return s.WhatIfListSerializer if self.action == "list" else s.WhatIfSerializer

    @extend_schema(request=s.WhatIfCreateSerializer, responses=s.WhatIfSerializer)
    def create(self, request: Request) -> Response:
        """Queue a replay of the window under the changes; poll the answer's resource."""
        data = s.WhatIfCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = whatif_create(actor=request.user, now=clock.now(), **data.validated_data)
        return Response(s.WhatIfSerializer(run).data, status=status.HTTP_201_CREATED)
