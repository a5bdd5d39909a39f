"""Shared fixtures: the demo scenario and its personas (admin, alice, bob, carol)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from hypothesis import settings

from console.demo import Demo, seed_demo

# CI explores the same examples on every run, so a red run means the change broke something;
# locally hypothesis keeps exploring new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run browser tests last: Playwright's sync API leaves an event loop in the main thread,
    where later tests' async_to_sync calls would refuse to run."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


def pytest_sessionfinish() -> None:
    """Remove the -wal and -shm files the file test database leaves (console/settings/test.py):
    the server threads' connections are still open when pytest-django removes the database."""
    from django.conf import settings as django

    name = django.DATABASES["default"].get("TEST", {}).get("NAME")
    if name:
        for suffix in ("-wal", "-shm"):
            Path(f"{name}{suffix}").unlink(missing_ok=True)


@pytest.fixture
def demo(db: None) -> Demo:
    """The mission's scenario, seeded into the test database."""
    return seed_demo()


def _persona(username: str) -> Callable[..., Any]:
    @pytest.fixture
    def fixture(demo: Demo) -> Any:
        return get_user_model().objects.get(username=username)

    fixture.__doc__ = f"The demo user {username}."
    return fixture


admin = _persona("admin")
alice = _persona("alice")
bob = _persona("bob")
carol = _persona("carol")


@pytest.fixture
def login(client: Client) -> Callable[[Any], Client]:
    """Return the test client logged in as a user (or anonymous for None)."""

    def as_user(user: Any) -> Client:
        client.logout()
        if user is not None:
            client.force_login(user)
        return client

    return as_user


@pytest.fixture
def run_async() -> Callable[[Any], Any]:
    """Run a coroutine to completion in its own thread and event loop.

    Playwright's sync API keeps an event loop running in the main thread once a browser test
    has run, so asyncio.run() there would refuse.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    def run(coroutine: Any) -> Any:
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, coroutine).result()

    return run
