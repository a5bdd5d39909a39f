"""Platform admin dashboards."""

from __future__ import annotations

from django.urls import path  # noqa: F401

app_name = "dashboard"
urlpatterns: list = []  # type: ignore[type-arg]
