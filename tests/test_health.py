"""/healthz, /readyz and who may read /metrics."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client

from console import health, metrics

pytestmark = pytest.mark.django_db


def test_healthz_answers_anyone_with_no_data() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok\n"


def test_readyz_is_ready_when_the_database_answers_in_the_embedded_mode() -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.content == b"ok\n"


def test_probes_answer_a_host_allowed_hosts_does_not_name(settings: Any) -> None:
    # The kubelet asks by the pod's IP; the pages still refuse that host.
    settings.ALLOWED_HOSTS = ["tidepool.example.com"]
    client = Client(HTTP_HOST="10.1.2.3:8000")
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz/").status_code == 200
    assert client.get("/login/").status_code == 400


def test_readyz_is_unready_without_saying_why_when_the_database_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def down() -> None:
        raise OperationalError("connection refused at 10.0.0.7")

    monkeypatch.setattr(health, "_database", down)
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.content == b"unready\n"
    assert "connection refused" in caplog.text  # the reason goes to the log


def test_readyz_is_unready_when_redis_does_not_answer(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    monkeypatch.setattr(health, "_redis", None)
    assert Client().get("/readyz").status_code == 503


@pytest.mark.parametrize(
    ("stamped_ago", "status"),
    [(None, 503), (5.0, 200), (300.0, 503)],
    ids=["never", "recent", "stale"],
)
def test_readyz_in_the_distributed_mode_wants_a_recent_cycle(
    settings: Any, monkeypatch: pytest.MonkeyPatch, stamped_ago: float | None, status: int
) -> None:
    from django.core.cache import cache

    settings.TIDEPOOL_RUNNER = "celery"
    settings.TIDEPOOL_READY_CYCLE_AGE = 120
    cache.delete(metrics.LAST_CYCLE_KEY)
    if stamped_ago is not None:
        cache.set(metrics.LAST_CYCLE_KEY, time.time() - stamped_ago, None)
    assert Client().get("/readyz").status_code == status


# /metrics is closed unless a token or the open setting allows it --------------------------


@pytest.fixture
def closed(settings: Any) -> Any:
    settings.TIDEPOOL_METRICS_TOKEN = ""
    settings.TIDEPOOL_METRICS_OPEN = "0"
    return settings


@pytest.mark.parametrize("username", [None, "bob", "admin"], ids=["anonymous", "member", "admin"])
def test_metrics_is_closed_by_default_whoever_asks(
    closed: Any, demo: Any, login: Any, username: str | None
) -> None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username=username) if username else None
    assert login(user).get("/metrics").status_code == 403


@pytest.mark.parametrize(
    ("header", "status"),
    [("", 403), ("Bearer wrong", 403), ("Token s3cret", 403), ("Bearer s3cret", 200)],
    ids=["none", "wrong", "other-scheme", "right"],
)
def test_metrics_wants_the_bearer_token(closed: Any, header: str, status: int) -> None:
    closed.TIDEPOOL_METRICS_TOKEN = "s3cret"
    headers = {"HTTP_AUTHORIZATION": header} if header else {}
    assert Client().get("/metrics", **headers).status_code == status


@pytest.mark.parametrize(
    ("address", "status"), [("127.0.0.1", 200), ("::1", 200), ("10.0.0.5", 403)]
)
def test_metrics_opened_for_localhost_answers_loopback_only(
    closed: Any, address: str, status: int
) -> None:
    closed.TIDEPOOL_METRICS_OPEN = "localhost"
    assert Client(REMOTE_ADDR=address).get("/metrics").status_code == status


def test_metrics_opened_answers_anyone(closed: Any) -> None:
    closed.TIDEPOOL_METRICS_OPEN = "1"
    response = Client(REMOTE_ADDR="10.0.0.5").get("/metrics")
    assert response.status_code == 200
    assert b"tidepool_last_cycle_age_seconds" in response.content


def test_metrics_answers_with_infinite_ages_while_the_cache_fails(
    closed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RedisConnectionError("Redis is down")

    monkeypatch.setattr(metrics.cache, "get", refuse)
    closed.TIDEPOOL_METRICS_OPEN = "1"
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert b"tidepool_last_cycle_age_seconds +Inf" in response.content


def test_a_worker_serves_its_counters_on_its_own_port() -> None:
    import requests
    from prometheus_client.parser import text_string_to_metric_families

    metrics.CYCLES.inc()
    server = metrics.worker_metrics_serve(port=0, addr="127.0.0.1")
    try:
        text = requests.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).text
    finally:
        server.shutdown()
        server.server_close()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"tidepool_cycles", "tidepool_cycle_duration_seconds"} <= names
    assert "tidepool_quota_guaranteed" not in names  # the web processes serve those
