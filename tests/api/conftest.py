"""API fixtures: token-authenticated clients for the personas, the control-loop helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.jobs.conftest import clock, sim, submit, tick  # noqa: F401  (fixtures shared with jobs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs a throwaway PostgreSQL cluster")


@pytest.fixture(autouse=True)
def _fresh_throttles() -> Iterator[None]:
    """Throttle counters live in the cache; each test starts with none."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api(db: None) -> Callable[[Any], APIClient]:
    """An API client sending the user's token (anonymous for None)."""

    def as_user(user: Any) -> APIClient:
        client = APIClient()
        if user is not None:
            token, _ = Token.objects.get_or_create(user=user)
            client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    return as_user
