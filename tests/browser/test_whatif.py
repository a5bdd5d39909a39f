"""What if…, in Chromium: from the Rebalance form the admin opens a what-if prefilled with
the move typed there, submits it, watches it run and reads the result with its plot."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from console import clock as clock_module
from jobs.backends import set_backend
from quotas.models import Quota

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def history(live_server: Any) -> Iterator[None]:
    """An hour of the demo recorded by the control loop; the clock stays at its end."""
    from whatif.history import demo_history_record

    previous = clock_module.get_clock()
    demo_history_record(start=datetime(2026, 11, 30, 7, 30, tzinfo=UTC), hours=1)
    yield
    clock_module.set_clock(previous)
    set_backend(None)


def test_admin_replays_a_rebalance_from_its_form_and_sees_the_plot(
    history: None, live_server: Any, sign_in: Any
) -> None:
    page = sign_in("admin")
    source = Quota.objects.get(name="Quota 1.2")
    page.goto(f"{live_server.url}/quotas/{source.pk}/rebalance/")
    page.select_option("select[name=target]", label="Quota 1.1")
    page.fill("input[name=gpu]", "8")
    page.click("[data-testid=whatif-link]")
    page.wait_for_url("**/what-if/new/**")
    prefilled = page.locator("[data-testid=prefilled]").inner_text()
    assert "Move 8 GPUs of guarantee from Quota 1.2 to Quota 1.1" in prefilled
    page.select_option("select[name=window]", "24h")
    page.click("[data-testid=whatif-form] button[type=submit]")
    page.wait_for_url("**/what-if/*/")
    # the page polls the replay and shows the result once it is done
    page.wait_for_selector("[data-testid=fidelity]", timeout=120_000)
    assert "Quota 1.1" in page.locator("[data-testid=quotas]").inner_text()
    page.wait_for_selector("#chart-allocation .main-svg")
    legend = page.locator("#chart-allocation").inner_text()
    assert "Quota 1.1 · baseline" in legend and "Quota 1.1 · proposal" in legend
    assert "points" in page.locator("[data-testid=fidelity]").inner_text()
