"""Template context shared by every page: the navigation the user may see."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from console.permissions import is_platform_admin


def navigation(request: HttpRequest) -> dict[str, Any]:
    """Tell the base template whether to show the platform-admin menu."""
    user = getattr(request, "user", None)
    return {"is_platform_admin": bool(user and user.is_authenticated and is_platform_admin(user))}


def clock(request: HttpRequest) -> dict[str, Any]:
    """The cluster clock's time and speed, so ages tick in the browser at the cluster's pace,
    and the zone picked for display (console.zones)."""
    from console import clock as cluster_clock
    from console.zones import BROWSER, COMMON, chosen_zone

    zone = chosen_zone(request)
    picked = BROWSER if zone is None else zone.key
    return {
        "cluster_now": cluster_clock.now(),
        "cluster_speed": cluster_clock.speed(),
        "display_zone": picked,
        "display_zones": COMMON if picked in COMMON or picked == BROWSER else (*COMMON, picked),
    }
