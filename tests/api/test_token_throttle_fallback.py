"""The token endpoint answers while Redis (its throttle's shared cache) is down, still throttled."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from console.api import TokenRateThrottle
from console.demo import PASSWORDS
from tests.servers import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis_down() -> Iterator[None]:
    """The shared cache is a Redis that nobody serves."""
    down = f"redis://127.0.0.1:{free_port()}/0"
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": down}
    }
    TokenRateThrottle.fallback.clear()
    with override_settings(CACHES=caches):
        yield
    TokenRateThrottle.fallback.clear()


def test_token_endpoint_answers_while_redis_is_down(demo: Any, redis_down: None) -> None:
    response = APIClient().post(
        "/api/v1/auth/token/", {"username": "bob", "password": PASSWORDS["bob"]}
    )
    assert response.status_code == 200
    assert response.json()["token"]


def test_token_endpoint_still_throttles_each_address_while_redis_is_down(
    demo: Any, redis_down: None
) -> None:
    client = APIClient(REMOTE_ADDR="10.0.0.7")
    limit = int(TokenRateThrottle.rate.split("/")[0])
    codes = [
        client.post("/api/v1/auth/token/", {"username": "bob", "password": "guess"}).status_code
        for _ in range(limit + 1)
    ]
    assert codes == [400] * limit + [429]
    other = APIClient(REMOTE_ADDR="10.0.0.8")
    assert other.post("/api/v1/auth/token/", {"username": "x", "password": "y"}).status_code == 400
