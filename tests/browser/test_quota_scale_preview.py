"""The admin lowers Quota 1.1 under bob's running jobs: the preview names the job, Confirm scales.

Set TIDEPOOL_SHOTS to a directory to also save screenshots of the quota's tabs there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.models import Workload
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.sync import backend_sync
from jobs.services.usage import usage_sample
from tests.browser.server import off_thread
from tests.jobs import conftest as control

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

clock, sim, submit = control.clock, control.sim, control.submit


@pytest.fixture
def cycle(clock: Any, sim: Any) -> Callable[..., None]:
    """Advance the manual clock, sync the simulated backend, run a cycle and sample usage."""

    def run(seconds: float = 0) -> None:
        def step() -> None:
            clock.advance(seconds)
            backend_sync(now=clock.now(), backend=sim)
            scheduling_cycle_run(now=clock.now(), backend=sim)
            usage_sample(now=clock.now())

        off_thread(step)

    return run


def _row(page: Any, name: str) -> Any:
    return page.locator(f"tr[data-quota='{name}']")


def _shoot(page: Any, name: str) -> None:
    """A full-page screenshot into $TIDEPOOL_SHOTS, when set (never into the repository)."""
    target = os.environ.get("TIDEPOOL_SHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(target) / f"{name}.png"), full_page=True)


def test_admin_sees_which_job_a_lower_quota_pushes_out_and_confirms(
    demo, bob, sign_in, live_server, cycle, submit
) -> None:
    first = off_thread(lambda: submit(bob, "first", replicas=3))
    cycle(1)
    second = off_thread(lambda: submit(bob, "second", replicas=3))
    cycle(1)
    off_thread(lambda: submit(bob, "extra", replicas=2, idle_policy="acceptable"))
    cycle(1)
    off_thread(lambda: submit(bob, "waits", replicas=1))
    for _ in range(40):  # forty minutes of samples for the Monitoring tab
        cycle(60)
    assert {w.name: w.in_quota for w in Workload.objects.filter(status="Running")} == {
        "first": True,
        "second": True,
        "extra": False,
    }

    page = sign_in("admin")
    _row(page, "Quota 1.1").get_by_role("link", name="Quota 1.1").click()
    usage = page.get_by_test_id("usage").locator("tr[data-pool='A100-80G']")
    assert usage.locator("[data-field='subtree-allocated']").inner_text() == "48"
    assert usage.locator("[data-field='subtree-borrowed']").inner_text() == "16"
    _shoot(page, "quota-overview")
    page.get_by_role("link", name="Nodes", exact=True).click()
    assert "GPUs on 8 of 16 nodes" in page.get_by_test_id("nodes-summary").inner_text()
    _shoot(page, "quota-nodes")
    page.get_by_role("link", name="Jobs", exact=True).click()
    jobs = page.get_by_test_id("quota-jobs")
    assert jobs.locator("tr[data-name='extra'] [data-field=in_quota]").inner_text() == (
        "Not in Quota"
    )
    assert jobs.locator("tr[data-name='waits'] [data-field=status]").inner_text() == "Queued"
    _shoot(page, "quota-jobs")
    page.get_by_role("link", name="Monitoring", exact=True).click()
    page.locator("#chart-allocation .main-svg").first.wait_for()
    _shoot(page, "quota-monitoring")

    # Scale Quota 1.1 from 48 to 24: the preview names the newest In-Quota job.
    page.get_by_role("link", name="Scale", exact=True).click()
    page.get_by_label("A100-80G GPUs guaranteed").fill("24")
    page.get_by_role("button", name="Scale").click()
    preview = page.get_by_test_id("confirm")
    assert "This running job would become Not in Quota" in preview.inner_text()
    assert preview.locator("tr[data-name='second']").count() == 1
    assert preview.locator("tr[data-name='first']").count() == 0
    effects = page.get_by_test_id("confirm-effects").inner_text()
    assert "Quota 1.1: A100-80G GPU min 48 → 24." in effects
    assert "1 running job (24 GPUs) becomes Not in Quota" in effects
    _shoot(page, "quota-scale-preview")

    # Back keeps what was typed; Confirm then scales through the service.
    page.get_by_role("button", name="Back").click()
    assert page.get_by_label("A100-80G GPUs guaranteed").input_value() == "24"
    page.get_by_role("button", name="Scale").click()
    page.get_by_role("button", name="Confirm scale").click()
    page.wait_for_url("**/quotas/")
    gpu = _row(page, "Quota 1.1").locator("[data-resource='gpu'] [data-bound='min']")
    assert gpu.inner_text() == "24"
    assert "1 running job becomes Not in Quota" in page.locator(".messages").inner_text()

    cycle()
    labels = {w.pk: w.in_quota for w in Workload.objects.filter(pk__in=[first.pk, second.pk])}
    assert labels == {first.pk: True, second.pk: False}
