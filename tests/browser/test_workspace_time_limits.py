"""Scheduling Configuration → Time Limits in a real browser: the preview, saving, the start form."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobs.choices import Kind, Status
from jobs.models import Workload
from tests.jobs import conftest as control
from workspaces.models import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

clock = control.clock
HOUR = 3600


def _running(demo: Any, alice: Any, now: Any, name: str, *, limit: int, ran: float) -> None:
    Workload.objects.create(
        name=name,
        kind=Kind.INTERACTIVE,
        status=Status.RUNNING,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        owner=alice,
        gpu=1000,
        max_duration=limit,
        submitted_at=now - timedelta(hours=ran),
        started_at=now - timedelta(hours=ran),
    )


def test_admin_previews_which_instances_a_lower_cap_shortens_then_saves(
    demo: Any, alice: Any, clock: Any, sign_in: Any, live_server: Any
) -> None:
    _running(demo, alice, clock.now(), "notebook", limit=87600 * HOUR, ran=9)
    _running(demo, alice, clock.now(), "short", limit=2 * HOUR, ran=0.5)
    page = sign_in("admin")
    page.goto(f"{live_server.url}/workspaces/workspace_a/")
    page.click("nav.tabs >> text=Scheduling Configuration")
    page.click("nav.tabs.sub >> text=Time Limits")
    preview = page.get_by_test_id("limits-preview")
    assert preview.inner_text() == ""

    page.fill("input[name=max_hours]", "8")
    assert preview.inner_text() == (
        "Saving lowers the time limit of 1 active instance to 8 h; 1 of them has run longer "
        "and stops within a minute."
    )
    notebook = page.locator("tr[data-name='notebook']")
    assert "shortened" in (notebook.get_attribute("class") or "")
    assert notebook.locator("[data-field=after]").inner_text().strip() == "→ 8 h"
    assert page.locator("tr[data-name='short'] [data-field=after]").inner_text() == ""
    page.fill("input[name=max_hours]", "87600")
    assert preview.inner_text() == "No active instance has a longer time limit."

    page.fill("input[name=max_hours]", "8")
    page.fill("input[name=default_hours]", "2")
    page.click("#save-limits")
    page.wait_for_load_state()
    assert page.locator(".messages").inner_text() == (
        "Time limits saved: default 2 h, at most 8 h. 1 active instance now has the new "
        "maximum: notebook."
    )
    assert notebook.locator("[data-field=limit]").inner_text() == "8 h"
    saved = Workspace.objects.get(name="workspace_a")
    assert (saved.instance_default_duration, saved.instance_max_duration) == (2 * HOUR, 8 * HOUR)

    # a default over the cap is refused on its field, and nothing changes
    page.fill("input[name=default_hours]", "10")
    page.click("#save-limits")
    page.wait_for_load_state()
    error = page.locator("[data-field-name=default_hours] .errorlist").inner_text()
    assert error == "The default duration (10 h) may not be longer than the maximum (8 h)."
    saved.refresh_from_db()
    assert saved.instance_default_duration == 2 * HOUR

    # the member sees the limits where she starts an instance
    page = sign_in("alice")
    page.goto(f"{live_server.url}/workspaces/workspace_a/instances/new/")
    assert page.get_by_test_id("instance-limits").inner_text() == (
        "Limit: default 2 h, at most 8 h"
    )
