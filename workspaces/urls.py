"""Workspace pages."""

from __future__ import annotations

from django.urls import path

from workspaces import views

app_name = "workspaces"
urlpatterns = [
    path("", views.WorkspaceListView.as_view(), name="list"),
]
