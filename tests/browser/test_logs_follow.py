"""Bob reads and follows a replica's log on the job page in Chromium (static/js/logs.js).

The simulated cluster makes the lines from the rows and the test's manual clock, so moving
the clock is what makes the replica print: the page must append exactly the new lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from jobs.services.cycle import scheduling_cycle_run
from jobs.services.sync import backend_sync
from tests.browser.server import off_thread
from tests.browser.test_jobs_live import demo_user
from tests.jobs import conftest as control

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

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


def steps(page: Any) -> list[str]:
    """The step lines the log box shows, without their times."""
    lines = page.locator("[data-logs=lines]").inner_text().splitlines()
    return [line.split(" ", 2)[2] for line in lines if re.search(r" step \d+ loss ", line)]


def test_follow_appends_the_new_lines_of_a_running_replica_until_it_ends(
    demo: Any, sign_in: Any, live_server: Any, cycle: Any, submit: Any, sim: Any
) -> None:
    job = off_thread(lambda: submit(demo_user("bob"), "resnet", replicas=2))
    cycle(1)
    cycle(30)
    cycle(300)  # ten steps each

    page = sign_in("bob")
    page.goto(f"{live_server.url}/workspaces/workspace_b/jobs/{job.pk}/")
    box = page.locator("[data-logs=lines]")
    box.get_by_text("[rank 0] step 10 loss").wait_for()
    page.get_by_label("Replica", exact=True).select_option("1")
    box.get_by_text("[rank 1] step 10 loss").wait_for()
    assert not box.get_by_text("[rank 0]").count()

    page.get_by_label("Follow").check()
    cycle(90)  # three more steps
    box.get_by_text("[rank 1] step 13 loss").wait_for()
    shown = steps(page)
    assert [line.split(" loss")[0] for line in shown[-4:]] == [
        "[rank 1] step 10",
        "[rank 1] step 11",
        "[rank 1] step 12",
        "[rank 1] step 13",
    ]
    assert len(shown) == len(set(shown)) == 13  # each appended once

    off_thread(lambda: sim.inject_pod_crash(job.pods.get(index=1), exit_code=3))
    cycle(5)
    box.get_by_text("process exited; exit code 3").wait_for()
    follow = page.get_by_label("Follow")
    page.wait_for_function("el => el.disabled && !el.checked", arg=follow.element_handle())
    assert "ended" in page.locator("[data-logs=notice]").inner_text()
