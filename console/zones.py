"""The display time zone: the one a user picked in the top bar (a cookie), else UTC.

Every absolute time on a page is a ``<time>`` that names its zone (console.templatetags).
The server writes it in the chosen zone, or in UTC when the user lets the browser choose;
static/js/chrome.js then rewrites it in the browser's zone. Times are kept in UTC throughout.
"""

from __future__ import annotations

from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

COOKIE = "tp_tz"
BROWSER = "browser"  # the cookie's value (or its absence) when the browser picks the zone
# Offered first in the top bar's list; the browser adds every zone it knows.
COMMON = (
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "America/New_York",
    "America/Los_Angeles",
    "Asia/Shanghai",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Australia/Sydney",
)


def chosen_zone(request: HttpRequest) -> ZoneInfo | None:
    """The zone the user picked, or None (the browser's zone; UTC on the server)."""
    name = request.COOKIES.get(COOKIE, "")
    if not name or name == BROWSER or len(name) > 64:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


class DisplayZoneMiddleware:
    """Render the request's times in the zone the user picked."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Activate the chosen zone for this request only."""
        zone = chosen_zone(request)
        if zone is None:
            return self.get_response(request)
        timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
