"""Websocket routes."""

from __future__ import annotations

from django.urls import path  # noqa: F401

websocket_urlpatterns: list = []  # type: ignore[type-arg]
