"""Browser fixtures: Debian's Chromium driven by Playwright against a live server."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.browser.server import LiveServer, UvicornThread, server

# Playwright's sync API runs an event loop in this thread; Django's ORM calls from the test
# body are still synchronous, so tell Django that is fine here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per module; closing it stops Playwright's event loop."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture(scope="session")
def uvicorn_server() -> Iterator[UvicornThread]:
    """The session's uvicorn server, started on first use and stopped at the end."""
    with server() as running:
        yield running


@pytest.fixture
def live_server(transactional_db: None, uvicorn_server: UvicornThread) -> LiveServer:
    """The console under uvicorn, websockets included (tests/browser/server.py)."""
    return uvicorn_server.live()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context and page per test."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


@pytest.fixture
def sign_in(live_server: Any, page: Any) -> Callable[[str], Any]:
    """Log in through the login form as a demo user."""
    from console.demo import PASSWORDS

    def as_user(username: str) -> Any:
        page.context.clear_cookies()
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORDS[username])
        page.click("button[type=submit]")
        page.wait_for_load_state()
        return page

    return as_user
