"""Top-level URLs: pages of each app, login, the Django admin."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from console import views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("quotas/", include("quotas.urls")),
    path("nodes/", include("quotas.node_urls")),
    path("workspaces/", include("workspaces.urls")),
    path("workspaces/<slug:workspace>/", include("jobs.urls")),
    path("dashboard/", include("jobs.dashboard_urls")),
    path("api/v1/", include("console.api_urls")),
    path("django-admin/", admin.site.urls),
]

# A database or Redis outage answers 503 (JSON under /api/), anything else Django's 500.
handler500 = "console.outage.server_error"
