"""At 1440, 1024 and 390 px the main pages fit the window, log no errors and stay on 127.0.0.1.

One test per width walks the quota tree, a jobs list, a job page, the submit form, a quota's
overview and the dashboard, as the platform admin (who may see every page), and reports
every page that breaks a rule at once.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pytest

from tests.browser.server import off_thread
from tests.dashboard.factories import T0, samples
from tests.jobs import conftest as control

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

clock, submit = control.clock, control.submit

WIDTHS = [1440, 1024, 390]
LOCAL_SCHEMES = {"data", "blob", "about"}


def _pages(demo: Any, job: Any) -> dict[str, str]:
    """What each page is, and its path."""
    return {
        "quota tree": "/quotas/",
        "jobs list": "/workspaces/workspace_b/jobs/",
        "job detail": f"/workspaces/workspace_b/jobs/{job.pk}/",
        "submit form": "/workspaces/workspace_b/jobs/new/",
        "quota overview": f"/quotas/{demo.quotas['Quota 1.1'].pk}/",
        "dashboard": "/dashboard/",
    }


@pytest.mark.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def test_main_pages_fit_the_window_without_errors_or_outside_requests(
    width: int, demo: Any, bob: Any, submit: Any, browser: Any, live_server: Any, sign_in: Any
) -> None:
    for quota in demo.quotas.values():
        samples(quota, start=T0, minutes=120, in_quota=8000)
    job = off_thread(lambda: submit(bob, "layout-check", gpus=2))
    page = sign_in("admin")
    page.set_viewport_size({"width": width, "height": 900})

    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def note(url: str) -> None:
        parsed = urlparse(url)
        if parsed.scheme not in LOCAL_SCHEMES and parsed.hostname != "127.0.0.1":
            outside.append(url)

    page.on("request", lambda r: note(r.url))
    page.on("websocket", lambda ws: note(ws.url))

    problems: list[str] = []
    for name, path in _pages(demo, job).items():
        errors.clear()
        outside.clear()
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None and response.status == 200, f"{name}: {response}"
        page.wait_for_load_state("load")
        if name == "dashboard":
            page.wait_for_selector("#chart-share .main-svg")
        if name in {"dashboard", "jobs list", "job detail"}:
            page.wait_for_selector("#live-status[data-state=live]")
        scroll, inner = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        if scroll > inner:
            wide = page.evaluate(WIDEST)
            problems.append(f"{name} at {width}px scrolls sideways: {scroll} > {inner} ({wide})")
        top = page.evaluate("document.querySelector('.topbar').getBoundingClientRect().width")
        if top < inner - 1:
            problems.append(f"{name} at {width}px: the top bar is {top}px of {inner}px")
        if errors:
            problems.append(f"{name} at {width}px logged errors: {errors}")
        if outside:
            problems.append(f"{name} at {width}px asked outside 127.0.0.1: {outside}")
    assert not problems, "\n".join(problems)


# What sticks out furthest to the right, to name the culprit when a page is too wide.
WIDEST = """
() => {
  let worst = null, right = 0;
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect().right;
    if (r > right) { right = r; worst = el; }
  }
  if (!worst) return '';
  const name = worst.tagName.toLowerCase() + '.' + [...worst.classList].join('.');
  return `${name}#${worst.id} right=${Math.round(right)}`;
}
"""
