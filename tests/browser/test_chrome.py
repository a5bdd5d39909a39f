"""The chrome in a browser: times in the reader's zone, ages that tick, an honest live badge."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from console import clock as clock_module
from console.clock import SimulatedClock
from console.demo import PASSWORDS
from tests.browser.server import off_thread
from tests.browser.test_live_catch_up import Cable
from tests.jobs import conftest as control

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

clock, submit = control.clock, control.submit
START = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


def _signed_in(browser: Any, live_server: Any, username: str, **options: Any) -> Any:
    """A page of a fresh context (with these options), signed in."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **options)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORDS[username])
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return page


def test_times_show_in_the_browsers_zone_until_the_reader_picks_another(
    demo: Any, bob: Any, submit: Any, browser: Any, live_server: Any
) -> None:
    job = off_thread(lambda: submit(bob, "zoned", gpus=1))  # submitted at 06:00 UTC
    page = _signed_in(browser, live_server, "bob", timezone_id="Asia/Tokyo")
    page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/{job.pk}/")
    first = page.get_by_test_id("timeline").locator("time").first
    assert first.get_attribute("datetime") == "2026-12-01T06:00:00+00:00"
    page.wait_for_function(
        "el => el.textContent === 'Dec 1 15:00:00 GMT+9'", arg=first.element_handle()
    )
    assert "Asia/Tokyo" in page.locator("#tz-select option[value=browser]").inner_text()

    page.select_option("#tz-select", "UTC")
    assert first.inner_text() == "Dec 1 06:00:00 UTC"
    page.reload()  # the server now writes the picked zone too
    first = page.get_by_test_id("timeline").locator("time").first
    assert first.inner_text() == "Dec 1 06:00:00 UTC"
    assert page.locator("#tz-select").input_value() == "UTC"
    page.context.close()


@pytest.fixture
def fast_clock() -> Iterator[SimulatedClock]:
    """The demo's kind of clock: a simulated minute per real second."""
    sim = SimulatedClock(START, 60)
    previous = clock_module.set_clock(sim)
    yield sim
    clock_module.set_clock(previous)


def test_ages_tick_at_the_cluster_clocks_pace_without_a_reload(
    demo: Any, bob: Any, fast_clock: Any, browser: Any, live_server: Any
) -> None:
    from jobs.services.workloads import Shape, job_submit

    ws = bob.memberships.get().workspace
    off_thread(
        lambda: job_submit(
            actor=bob,
            workspace=ws,
            quota=ws.quotas.get(),
            name="ticking",
            shape=Shape(replicas=1, gpu=1000, priority=5),
            node_pools=[demo.node_pool],
            now=fast_clock.now(),
        )
    )
    page = _signed_in(browser, live_server, "bob")
    page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/")
    age = page.locator("tr[data-name=ticking] time.age")
    page.evaluate("window.__same_page = true")
    # Three real seconds are three cluster minutes.
    page.wait_for_function(
        "el => /^[3-9]m$/.test(el.textContent)", arg=age.element_handle(), timeout=10_000
    )
    assert page.evaluate("window.__same_page") is True
    page.context.close()


def test_a_page_whose_feed_is_down_says_so_and_marks_its_rows_stale(
    demo: Any, bob: Any, submit: Any, browser: Any, live_server: Any
) -> None:
    off_thread(lambda: submit(bob, "watched", gpus=1))
    page = _signed_in(browser, live_server, "bob")
    cable = Cable()
    page.route_web_socket(re.compile(r"/ws/"), cable.route)
    page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/")
    badge = page.locator("#live-status")
    row = page.locator("tr[data-name=watched]")
    page.wait_for_selector("#live-status[data-state=live]")
    assert badge.inner_text() == "Live"
    assert "stale" not in (row.get_attribute("class") or "")

    cable.cut()
    page.wait_for_selector("#live-status[data-state=reconnecting]")
    assert badge.inner_text() == "Reconnecting…"
    page.wait_for_selector("#live-status[data-state=offline]", timeout=10_000)
    assert badge.inner_text() == "Offline"
    assert "stale" in (row.get_attribute("class") or "")
    assert page.locator("#stale-hint").is_visible()

    cable.down = False
    page.wait_for_selector("#live-status[data-state=live]", timeout=10_000)
    assert "stale" not in (row.get_attribute("class") or "")
    assert not page.locator("#stale-hint").is_visible()
    page.context.close()


def test_an_unknown_address_shows_the_consoles_404_with_a_way_home(
    demo: Any, browser: Any, live_server: Any
) -> None:
    page = _signed_in(browser, live_server, "carol")
    response = page.goto(f"{live_server.url}/no/such/page/")
    assert response is not None and response.status == 404
    assert page.locator(".topbar .brand").is_visible()
    page.get_by_role("link", name="Back to the console").click()
    page.wait_for_load_state()
    assert page.url.endswith("/workspaces/")
    page.context.close()
