"""Resource Quota pages."""

from __future__ import annotations

from django.urls import path

from quotas.views import quotas

app_name = "quotas"
urlpatterns = [
    path("", quotas.QuotaListView.as_view(), name="list"),
]
