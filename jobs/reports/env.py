"""The environment a replica's pod gets: where to report, its token, and where to resume."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

from jobs.reports.tokens import report_token

if TYPE_CHECKING:
    from jobs.models import Pod

# The report endpoint, under the base URL pods reach the console at.
REPORT_PATH = "/api/v1/report/"


def report_url() -> str:
    """The report endpoint's URL from TIDEPOOL_REPORT_URL (the console's base URL)."""
    return settings.TIDEPOOL_REPORT_URL.rstrip("/") + REPORT_PATH


def report_env(pod: Pod) -> dict[str, str]:
    """TIDEPOOL_REPORT_URL, TIDEPOOL_REPORT_TOKEN and (when set) TIDEPOOL_RESUME_FROM."""
    env = {"TIDEPOOL_REPORT_URL": report_url(), "TIDEPOOL_REPORT_TOKEN": report_token(pod)}
    if pod.resume_from:
        env["TIDEPOOL_RESUME_FROM"] = pod.resume_from
    return env
