"""Bob's jobs pages in Chromium, updated live over the workspace websocket.

The browser tests' live_server is uvicorn in a thread of this process (tests/browser/server.py),
sharing the in-memory channel layer and test database, so the test drives the control loop
itself (ManualClock, SimulatedBackend, backend_sync, scheduling_cycle_run) and each event it
records reaches the page's websocket after commit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from jobs.choices import Status
from jobs.models import Workload
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.scaling import service_scale
from jobs.services.sync import backend_sync
from jobs.services.workloads import Shape, service_create
from tests.browser.server import off_thread
from tests.jobs import conftest as control

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The control-loop fixtures of tests/jobs (a manual clock, the simulated backend, submit).
clock, sim, submit = control.clock, control.sim, control.submit


@pytest.fixture
def cycle(clock: Any, sim: Any) -> Callable[..., None]:
    """Advance the manual clock, then sync the simulated backend and run a scheduling cycle."""

    def run(seconds: float = 0) -> None:
        def step() -> None:
            clock.advance(seconds)
            backend_sync(now=clock.now(), backend=sim)
            scheduling_cycle_run(now=clock.now(), backend=sim)

        off_thread(step)

    return run


@pytest.fixture
def service(demo: Any, alice: Any, clock: Any) -> Workload:
    """Alice's chat-api in Quota 1 (8 GPUs a replica, 1-8), created off Playwright's loop."""
    return off_thread(
        lambda: service_create(
            actor=alice,
            workspace=demo.workspaces["workspace_a"],
            quota=demo.quotas["Quota 1"],
            name="chat-api",
            shape=Shape(replicas=1, gpu=8000),
            node_pools=[demo.node_pool],
            min_replicas=1,
            max_replicas=8,
            now=clock.now(),
        )
    )


def _row(page: Any, name: str) -> Any:
    return page.locator(f"tr[data-name='{name}']")


def _submit(page: Any, name: str, *, replicas: int, idle: str) -> None:
    """Fill and send the Submit a training job form."""
    page.get_by_role("link", name="Submit a training job").click()
    page.get_by_label("Name").fill(name)
    page.get_by_label("Replicas", exact=True).fill(str(replicas))
    page.get_by_label("GPUs per replica").fill("8")
    page.get_by_label(idle, exact=True).check()
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/jobs/")


def _live(page: Any) -> None:
    """Wait until the page's websocket is open."""
    page.wait_for_function("document.documentElement.dataset.live === 'open'")


def test_bob_submits_and_watches_jobs_go_running_in_and_not_in_quota(
    demo, sign_in, live_server, cycle, service
) -> None:
    page = sign_in("bob")
    page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/")
    _live(page)

    _submit(page, "resnet", replicas=6, idle="Acceptable")
    _live(page)
    resnet = _row(page, "resnet")
    assert resnet.locator("[data-field=status]").inner_text() == "Queued"
    assert resnet.locator("[data-field=in_quota]").inner_text() == "—"

    cycle(1)  # admitted In Quota: 48 GPUs, all of Quota 1.1
    status = resnet.locator("[data-field=status]")
    page.wait_for_function(
        "el => el.textContent === 'Running'", arg=status.element_handle(), timeout=10_000
    )
    quota = page.locator("tr[data-name='resnet'] [data-field=in_quota]")
    assert quota.inner_text() == "In Quota"
    cycle(30)
    page.locator("tr[data-name='resnet'] [data-field=pods]").get_by_text("6 Running").wait_for()

    # A second job fits only on capacity Quota 1.1 borrows from its parent.
    _submit(page, "bert", replicas=2, idle="Acceptable")
    _live(page)
    cycle(1)
    cycle(30)
    bert = page.locator("tr[data-name='bert']")
    bert.locator("[data-field=status]").get_by_text("Running").wait_for()
    bert.locator("[data-field=in_quota]").get_by_text("Not in Quota").wait_for()
    page.locator("tr[data-name='resnet'] [data-field=in_quota]").get_by_text("In Quota").wait_for()
    assert Workload.objects.get(name="bert").in_quota is False


def test_service_scale_up_preempts_bobs_borrowed_job_live(
    demo, sign_in, live_server, cycle, service, submit, clock
) -> None:
    own = off_thread(lambda: submit(demo_user("bob"), "own", replicas=6))
    cycle(1)
    borrowed = off_thread(
        lambda: submit(demo_user("bob"), "borrowed", replicas=5, idle_policy="acceptable")
    )
    cycle(1)
    cycle(30)
    assert Workload.objects.get(pk=borrowed.pk).in_quota is False
    assert Workload.objects.get(pk=own.pk).in_quota is True

    page = sign_in("bob")
    page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/")
    _live(page)
    row = _row(page, "borrowed")
    assert row.locator("[data-field=pods]").inner_text() == "5 Running"
    assert row.locator("[data-field=in_quota]").inner_text() == "Not in Quota"
    page.evaluate("window.__same_page = true")

    # 08:00: alice's chat-api in Quota 1 goes to 8 replicas of 8 GPUs and takes them back.
    off_thread(
        lambda: service_scale(service=service, replicas=8, now=clock.now(), reason="rule day")
    )
    cycle()
    row.locator("[data-field=pods]").get_by_text("5 Resource Preempted").wait_for()
    row.locator("[data-field=status]").get_by_text("Requeued").wait_for()
    notice = page.get_by_test_id("notices")
    notice.get_by_text(
        "borrowed was preempted by chat-api, whose quota took back the capacity it had lent."
    ).wait_for()
    assert page.evaluate("window.__same_page") is True  # no reload
    assert Workload.objects.get(pk=borrowed.pk).status == Status.REQUEUED

    # The job page tells why, and keeps the node names of borrowed pods to itself.
    row.get_by_role("link", name="borrowed").click()
    timeline = page.get_by_test_id("timeline")
    assert re.search(
        r"Preempted by chat-api: .*Work lost since (the last checkpoint|the start)",
        timeline.inner_text(),
    )
    pods = page.get_by_test_id("pods")
    assert pods.locator("[data-field=pod-status]", has_text="Resource Preempted").count() == 5
    assert pods.get_by_text("borrowed capacity", exact=True).count() == 5
    assert "a100-" not in pods.inner_text()

    # Night: chat-api back to 1; the job resumes from its checkpoint while the page watches.
    page.evaluate("window.__same_page = true")
    off_thread(
        lambda: service_scale(service=service, replicas=1, now=clock.now(), reason="rule night")
    )
    cycle()
    page.locator("#job-live [data-field=status]").get_by_text("Running").wait_for()
    # preempted before its first checkpoint: it starts again from the beginning, and says so
    timeline.get_by_text(re.compile("Started again from the beginning")).wait_for()
    assert page.evaluate("window.__same_page") is True


def test_carol_cannot_reach_bobs_job_page(demo, sign_in, live_server, submit) -> None:
    job = off_thread(lambda: submit(demo_user("bob"), "private"))
    page = sign_in("carol")
    response = page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/{job.pk}/")
    assert response.status == 404
    assert "private" not in page.content()
    response = page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/")
    assert response.status == 404


def demo_user(username: str) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username)
