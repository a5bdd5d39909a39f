"""The admin's dashboard gains a point when the control loop writes a sample, without a reload.

The browser tests' live_server is uvicorn in a thread of the test process
(tests/browser/server.py), so the in-memory channel layer is shared between the test body,
which calls usage_sample, and the consumer that relays the push to the browser.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from cluster.models import Node
from tests.dashboard.factories import T0, pod_on, running_workload, samples

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_allocation_chart_gains_a_point_after_a_sample_without_reload(
    demo, page, sign_in, live_server
) -> None:
    for quota in demo.quotas.values():
        samples(quota, start=T0, minutes=60, in_quota=8000)
    sign_in("admin")
    page.goto(f"{live_server.url}/dashboard/")
    page.wait_for_selector("#live-status[data-state=live]")
    points = "document.getElementById('chart-allocation').data[0].x.length"
    before = page.evaluate(points)
    assert before == 12  # an hour of minutes, in 5-minute buckets
    page.evaluate("window.__notReloaded = true")

    node = Node.objects.get(name="a100-01")
    pod_on(running_workload(demo, name="fresh", gpu=8000), node, list(range(8)))

    _sample_off_thread(T0 + timedelta(minutes=60))

    page.wait_for_function(f"{points} === {before + 1}")
    last_x = page.evaluate(
        "(() => { const x = document.getElementById('chart-allocation').data[0].x;"
        " return x[x.length - 1]; })()"
    )
    assert last_x == "2026-12-01 01:00:00"
    assert page.evaluate("window.__notReloaded") is True
    pending = page.evaluate("document.getElementById('chart-pending').data[0].x.length")
    assert pending == before + 1
    assert page.locator("#allocated-now").inner_text() == "8 of 128 schedulable GPUs allocated now"
    bob_band = page.evaluate(
        "(() => { const d = document.getElementById('chart-allocation').data;"
        " const t = d.find(t => t.name === 'Quota 1.1 · In Quota');"
        " return t.y[t.y.length - 1]; })()"
    )
    assert bob_band == 8
    page.screenshot(path="/tmp/shots/browser-dashboard-live.png", full_page=True)

    # A day later the window slides: every point older than 24 hours before it is dropped.
    _sample_off_thread(T0 + timedelta(hours=25))
    page.wait_for_function(f"{points} === 2")
    assert page.evaluate("document.getElementById('chart-allocation').data[0].x") == [
        "2026-12-01 01:00:00",
        "2026-12-02 01:00:00",
    ]
    assert page.evaluate("window.__notReloaded") is True


def _sample_off_thread(now: Any) -> None:
    """usage_sample in a thread of its own, as the embedded runner calls it.

    Not in the test's thread, where Playwright's sync API keeps an event loop running.
    """
    from django.db import connection

    from jobs.services.usage import usage_sample

    def sample() -> None:
        try:
            usage_sample(now=now)
        finally:
            connection.close()

    runner = threading.Thread(target=sample)
    runner.start()
    runner.join(10)
