"""The REST API under /api/v1/: routes, token login, the OpenAPI schema and its Swagger UI."""

from __future__ import annotations

from collections.abc import Sequence

from django.urls import path
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authentication import BaseAuthentication
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.routers import SimpleRouter
from rest_framework.throttling import BaseThrottle

from cluster.api import views as cluster
from console.api import ID_REGEX, APIMixin, TokenRateThrottle
from dashboard.api import views as dashboard
from jobs.api import views as jobs
from jobs.reports.views import report_view
from quotas.api import views as quotas
from whatif.api import views as whatif
from workspaces.api import views as workspaces


class TokenView(APIMixin, ObtainAuthToken):
    """POST username and password, get ``{"token": "…"}``; send ``Authorization: Token …``."""

    authentication_classes: Sequence[type[BaseAuthentication]] = ()
    throttle_classes: Sequence[type[BaseThrottle]] = (TokenRateThrottle,)


router = SimpleRouter()
router.register("resource-pools", cluster.ResourcePoolViewSet, basename="resource-pool")
router.register("node-pools", cluster.NodePoolViewSet, basename="node-pool")
router.register("nodes", cluster.NodeViewSet, basename="node")
router.register("quotas", dashboard.QuotaViewSet, basename="quota")
router.register(
    rf"quotas/(?P<quota_id>{ID_REGEX})/audit", quotas.QuotaAuditViewSet, basename="quota-audit"
)
router.register("quota-calendar", quotas.CalendarRuleViewSet, basename="quota-calendar")
router.register("workspaces", workspaces.WorkspaceViewSet, basename="workspace")
router.register(
    rf"workspaces/(?P<workspace_id>{ID_REGEX})/members",
    workspaces.MemberViewSet,
    basename="workspace-member",
)
router.register(
    rf"workspaces/(?P<workspace_id>{ID_REGEX})/quotas",
    workspaces.BindingViewSet,
    basename="workspace-quota",
)
router.register(
    rf"workspaces/(?P<workspace_id>{ID_REGEX})/resource-usage",
    workspaces.UsageRuleViewSet,
    basename="workspace-resource-usage",
)
router.register("jobs", jobs.JobViewSet, basename="job")
router.register("services", jobs.ServiceViewSet, basename="service")
router.register(
    rf"services/(?P<service_id>{ID_REGEX})/rules", jobs.ScalingRuleViewSet, basename="service-rule"
)
router.register("instances", jobs.InstanceViewSet, basename="instance")
router.register("usage", jobs.UsageViewSet, basename="usage")
router.register("what-if", whatif.WhatIfViewSet, basename="what-if")

urlpatterns = [
    path("auth/token/", extend_schema(tags=["auth"])(TokenView).as_view(), name="api-token"),
    # Replicas' reports (token per attempt, not a user's): jobs/reports, README "Reports".
    path("report/", report_view, name="api-report"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    *router.urls,
]
