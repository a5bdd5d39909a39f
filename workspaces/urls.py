"""Workspace pages."""

from __future__ import annotations

from django.urls import path

from workspaces import views

app_name = "workspaces"
urlpatterns = [
    path("", views.WorkspaceListView.as_view(), name="list"),
    path("new/", views.WorkspaceCreateView.as_view(), name="create"),
    path("<slug:name>/", views.WorkspaceDetailView.as_view(), name="detail"),
    path("<slug:name>/members/", views.WorkspaceMemberAddView.as_view(), name="member_add"),
    path(
        "<slug:name>/members/<int:user_id>/remove/",
        views.WorkspaceMemberRemoveView.as_view(),
        name="member_remove",
    ),
    path("<slug:name>/quotas/", views.WorkspaceQuotaBindView.as_view(), name="quota_bind"),
    path(
        "<slug:name>/quotas/<int:quota_id>/unbind/",
        views.WorkspaceQuotaUnbindView.as_view(),
        name="quota_unbind",
    ),
    path(
        "<slug:name>/scheduling/",
        views.SchedulingConfigurationView.as_view(),
        name="scheduling",
    ),
    path(
        "<slug:name>/scheduling/resource-usage/",
        views.ResourceUsageView.as_view(),
        name="resource_usage",
    ),
    path(
        "<slug:name>/scheduling/time-limits/",
        views.TimeLimitsView.as_view(),
        name="time_limits",
    ),
]
