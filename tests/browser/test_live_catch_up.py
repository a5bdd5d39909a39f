"""A jobs page whose websocket dropped shows, once it reconnects, what happened meanwhile.

Playwright routes the page's websocket to the server and cuts it on the test's word (as a
Redis outage or a proxy timeout would), refusing reconnects until the test lets them through.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.server import off_thread
from tests.browser.test_jobs_live import _live, _row, cycle, demo_user
from tests.jobs import conftest as control

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

clock, sim, submit = control.clock, control.sim, control.submit
cycle = cycle  # the fixture, under this module's name


class Cable:
    """The page's websocket through Playwright, which the test can cut and mend."""

    def __init__(self) -> None:
        self.down = False
        self.routes: list[tuple[Any, Any]] = []

    def route(self, ws: Any) -> None:
        """Connect the page's socket to the server, or refuse it while the cable is cut."""
        if self.down:
            ws.close(code=1013)
            return
        self.routes.append((ws, ws.connect_to_server()))

    def cut(self) -> None:
        """Drop every open socket and refuse new ones."""
        self.down = True
        for page_side, server_side in self.routes:
            server_side.close()
            page_side.close(code=1013)
        self.routes = []


def test_a_page_that_lost_its_socket_catches_up_on_reconnect(
    demo: Any, sign_in: Callable[[str], Any], live_server: Any, cycle: Any, submit: Any
) -> None:
    off_thread(lambda: submit(demo_user("bob"), "while-away", replicas=1))
    page = sign_in("bob")
    cable = Cable()
    page.route_web_socket(re.compile(r"/ws/"), cable.route)
    page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/")
    _live(page)
    status = _row(page, "while-away").locator("[data-field=status]")
    assert status.inner_text() == "Queued"

    cable.cut()
    page.wait_for_function("document.documentElement.dataset.live === 'closed'")
    cycle(1)  # admitted while the page is away: the push reaches no socket of it
    page.wait_for_timeout(1500)  # the page retries, and is refused
    assert status.inner_text() == "Queued"

    cable.down = False
    page.wait_for_function(
        "el => el.textContent === 'Running'", arg=status.element_handle(), timeout=10_000
    )
