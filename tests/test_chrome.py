"""The app's chrome: demo settings without DEBUG, error pages with a way back, static files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.test import Client, RequestFactory

from console import clock
from console.outage import server_error
from console.runner import Runner
from tests.api.test_serving import _call

ROOT = Path(__file__).resolve().parents[1]


def _demo_debug(**env: str) -> str:
    """settings.DEBUG as `make demo` would have it, with these environment variables."""
    environ = {k: v for k, v in os.environ.items() if k not in {"TIDEPOOL_DEBUG", "DEBUG"}}
    environ.update(env, DJANGO_SETTINGS_MODULE="console.settings.local")
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_demo_settings_do_not_run_with_debug_on() -> None:
    assert _demo_debug() == "False"
    assert _demo_debug(DEBUG="1") == "False"  # the old switch no longer turns it on
    assert _demo_debug(TIDEPOOL_DEBUG="1") == "True"


@pytest.mark.django_db
def test_a_missing_page_shows_the_chrome_and_a_way_home(demo: Any, bob: Any, login: Any) -> None:
    response = login(bob).get("/workspaces/workspace_b/jobs/999999/")
    assert response.status_code == 404
    page = response.content.decode()
    assert '<header class="topbar">' in page and ">bob</span>" in page
    assert '<a class="button" href="/">Back to the console</a>' in page
    assert 'rel="icon"' in page


@pytest.mark.django_db
def test_a_refusal_shows_the_chrome_and_a_way_home(demo: Any, bob: Any) -> None:
    from django.views.defaults import permission_denied

    request = RequestFactory().get("/quotas/")
    request.user = bob
    response = permission_denied(request, PermissionDenied())
    assert response.status_code == 403
    page = response.content.decode()
    assert '<header class="topbar">' in page and "You may not do this" in page
    assert '<a class="button" href="/">Back to the console</a>' in page


def test_a_form_with_a_stale_csrf_token_gets_the_apps_403_in_words(demo: Any, admin: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    response = client.post("/quotas/new/", {"name": "x"})
    assert response.status_code == 403
    page = response.content.decode()
    assert '<header class="topbar">' in page and "Nothing was changed" in page
    assert "CSRF verification failed" not in page


def test_a_server_error_page_has_the_chrome_and_needs_no_database() -> None:
    response = server_error(RequestFactory().get("/quotas/"))  # no exception: not an outage
    assert response.status_code == 500
    page = response.content.decode()
    assert '<header class="topbar">' in page and "Back to the console" in page


def test_a_server_error_answers_json_under_the_api_and_a_plain_line_if_its_page_breaks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = server_error(RequestFactory().get("/api/v1/jobs/"))
    assert api.status_code == 500 and api["Content-Type"] == "application/json"
    assert b"it has been logged" in api.content

    def broken(name: str) -> Any:  # as with production's static manifest not collected
        raise ValueError("Missing staticfiles manifest entry for 'favicon.svg'")

    monkeypatch.setattr("console.outage.loader.get_template", broken)
    page = server_error(RequestFactory().get("/quotas/"))
    assert page.status_code == 500 and b"it has been logged" in page.content


@pytest.mark.django_db(transaction=True)
def test_serve_serves_static_files_with_debug_off(
    demo: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DEBUG = False
    apps: list[Any] = []
    real_config = uvicorn.Config

    def config(app: Any, **kwargs: Any) -> Any:
        apps.append(app)
        return real_config(app, **kwargs)

    async def no_serving(self: uvicorn.Server, sockets: Any = None) -> None:
        """uvicorn returns at once."""

    monkeypatch.setattr(uvicorn, "Config", config)
    monkeypatch.setattr(uvicorn.Server, "serve", no_serving)
    monkeypatch.setattr(Runner, "start", lambda self: None)
    monkeypatch.setattr(Runner, "stop", lambda self: None)
    previous = clock.get_clock()
    try:
        call_command("serve", "--no-traffic")
    finally:
        clock.set_clock(previous)
    favicon = _call(apps[0], "GET", "/static/favicon.svg", host="127.0.0.1")
    assert favicon["status"] == 200 and favicon["body"].startswith(b"<svg")
    css = _call(apps[0], "GET", "/static/css/tidepool.css", host="127.0.0.1")
    assert css["status"] == 200


def test_timeline_kinds_read_as_words() -> None:
    from console.templatetags.tidepool import event_label

    assert event_label("preemptor") == "preempted others"
    assert event_label("limit") == "time limit"
    assert event_label("admitted") == "admitted"
