"""Workspace-scoped workload pages: jobs, services, instances."""

from __future__ import annotations

from django.urls import path  # noqa: F401

app_name = "jobs"
urlpatterns: list = []  # type: ignore[type-arg]
