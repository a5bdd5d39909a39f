"""Middleware that refuses a request whose path, query or form values hold a NUL character."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.settings import api_settings

from console.parsers import NUL_MESSAGE

FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})


class RefuseNulMiddleware:
    """Answer 400 naming the field when the path, query string or a form value holds NUL.

    PostgreSQL refuses NUL in text, so one reaching a query answered 500; no field of ours
    takes one. JSON bodies are checked by console.parsers.JSONParser.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Refuse, or pass the request on."""
        field = nul_field(request)
        if field is not None:
            return JsonResponse({field: [NUL_MESSAGE]}, status=400)
        return self.get_response(request)


def nul_field(request: HttpRequest) -> str | None:
    """The first field (or "path") holding NUL, or None."""
    if "\x00" in request.path:
        return "path"
    sources = [request.GET]
    if request.content_type in FORM_TYPES and request.method == "POST":
        sources.append(request.POST)
    for data in sources:
        for key, values in data.lists():
            if "\x00" in key:
                return api_settings.NON_FIELD_ERRORS_KEY
            if any("\x00" in value for value in values):
                return key
    return None
