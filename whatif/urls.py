"""What if… pages under /what-if/."""

from __future__ import annotations

from django.urls import path

from whatif import views

urlpatterns = [
    path("", views.WhatIfListView.as_view(), name="list"),
    path("new/", views.WhatIfCreateView.as_view(), name="new"),
    path("compare/", views.WhatIfCompareView.as_view(), name="compare"),
    path("<int:pk>/", views.WhatIfDetailView.as_view(), name="detail"),
]
