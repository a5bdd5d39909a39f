"""Top-level URLs: pages of each app, login, the Django admin."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from cluster import urls as cluster_urls
from console import health, views
from console.metrics_view import metrics_view
from dashboard import urls as dashboard_urls
from jobs.views.all_jobs import AllJobsView
from quotas import urls as quotas_urls
from whatif import urls as whatif_urls
from workspaces import urls as workspaces_urls

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Each namespace joins its own app's pages and the dashboard's pages that read workloads.
    path(
        "quotas/",
        include((quotas_urls.urlpatterns + dashboard_urls.quota_urlpatterns, "quotas")),
    ),
    path(
        "nodes/",
        include((cluster_urls.urlpatterns + dashboard_urls.node_urlpatterns, "nodes")),
    ),
    path(
        "workspaces/",
        include((workspaces_urls.urlpatterns + dashboard_urls.workspace_urlpatterns, "workspaces")),
    ),
    path("workspaces/<slug:workspace>/", include("jobs.urls")),
    path("jobs/", AllJobsView.as_view(), name="all_jobs"),
    path("dashboard/", include("dashboard.urls")),
    path("what-if/", include((whatif_urls.urlpatterns, "whatif"))),
    path("api/v1/", include("console.api_urls")),
    path("django-admin/", admin.site.urls),
    # Answered by console.health.ProbeMiddleware first; named here for reverse() and routes.
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
]

# A database or Redis outage answers 503 (JSON under /api/), anything else Django's 500.
handler500 = "console.outage.server_error"
