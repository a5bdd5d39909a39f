"""Web processes share one cache through Redis: a throttle counted in one holds in another."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from console.api import TokenRateThrottle

from .conftest import ROOT, _celery_env

pytestmark = pytest.mark.django_db(transaction=True)

# Another web process asks for a token with the same client address as this one.
OTHER_PROCESS = """
import django
django.setup()
from django.test import Client
response = Client().post("/api/v1/auth/token/", {"username": "x", "password": "y"})
print(response.status_code)
"""


def test_token_throttle_counts_requests_from_every_web_process() -> None:
    key = "throttle_token_127.0.0.1"
    cache.delete(key)
    try:
        client = APIClient(REMOTE_ADDR="127.0.0.1")
        limit = int(TokenRateThrottle.rate.split("/")[0])
        codes = [
            client.post("/api/v1/auth/token/", {"username": "x", "password": "y"}).status_code
            for _ in range(limit)
        ]
        assert codes == [400] * limit
        other = subprocess.run(
            [sys.executable, "-c", OTHER_PROCESS],
            cwd=ROOT,
            env=_celery_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.stdout.strip().splitlines()[-1] == "429", other.stderr[-2000:]
    finally:
        cache.delete(key)
