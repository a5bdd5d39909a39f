"""All jobs and the submit form at 1440, 1024 and 390 px: no sideways scroll, no console
errors, no request off this machine; a never-fitting submit shows its numbers on its field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import pytest

from jobs.services.workloads import Shape, job_submit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = [1440, 1024, 390]


def _watch(page: Any) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    away: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on(
        "request",
        lambda r: (
            away.append(r.url) if urlparse(r.url).hostname not in ("127.0.0.1", None) else None
        ),
    )
    return errors, away


def _fits(page: Any, *within: str) -> None:
    """The page (or, where the shared chrome is not this page's to fix, the parts named by
    CSS selector) ends inside the window."""
    inner = page.evaluate("innerWidth")
    if not within:
        width = page.evaluate("document.scrollingElement.scrollWidth")
        assert width <= inner, width
    for selector in within:
        right = page.evaluate(f"document.querySelector({selector!r}).getBoundingClientRect().right")
        assert right <= inner, (selector, right)


@pytest.mark.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def test_all_jobs_fits_the_screen(
    demo: Any, bob: Any, sign_in: Callable[[str], Any], live_server: Any, width: int
) -> None:
    job_submit(
        actor=bob,
        workspace=demo.workspaces["workspace_b"],
        quota=demo.quotas["Quota 1.1"],
        name="a-rather-long-training-job-name-0001",
        shape=Shape(replicas=2, gpu=8000),
        node_pools=[demo.node_pool],
    )
    page = sign_in("admin")
    page.set_viewport_size({"width": width, "height": 900})
    errors, away = _watch(page)
    page.goto(f"{live_server.url}/jobs/")
    assert page.locator("[data-testid=all-jobs] tbody tr").count() == 1
    assert page.locator("[data-field=workspace]").inner_text() == "workspace_b"
    _fits(page)
    page.fill("input[name=search]", "rather")
    page.click("[data-testid=all-jobs-filters] button[type=submit]")
    page.wait_for_load_state()
    assert "search=rather" in page.url
    assert page.locator("[data-testid=all-jobs] tbody tr[data-workload]").count() == 1
    assert (errors, away) == ([], [])


@pytest.mark.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def test_the_submit_form_shows_room_and_refuses_a_job_bigger_than_any_node(
    demo: Any, sign_in: Callable[[str], Any], live_server: Any, width: int
) -> None:
    page = sign_in("bob")
    page.set_viewport_size({"width": width, "height": 900})
    errors, away = _watch(page)
    page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/new/")
    room = page.locator("[data-testid=room] tr[data-quota='Quota 1.1']")
    assert room.locator("[data-field=free]").inner_text() == "48 GPUs"
    # the workspace tabs above (workspaces/_header.html) are the layout's to fold at 390 px
    _fits(page, "[data-testid=room]", "form.job-form")
    page.fill("input[name=name]", "too-big")
    page.fill("input[name=gpu]", "16")
    page.click("form.job-form button[type=submit]")
    page.wait_for_load_state()
    message = page.locator("[data-field-name=gpu] .errorlist").inner_text()
    assert "asks 16 GPUs a replica; the largest node in pool A100-80G has 8 GPUs" in message
    _fits(page, "[data-testid=room]", "form.job-form")
    assert (errors, away) == ([], [])
