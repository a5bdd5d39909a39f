"""Metrics and probes across processes: a real web process (uvicorn), Celery worker and beat.

The worker runs the cycles; its counters reach the web process's /metrics through
prometheus-client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR, shared by both). /readyz
turns unready while PostgreSQL or Redis is stopped, and ready again once they are back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.distributed import redis_fixtures as faults
from tests.servers import RedisServer, free_port, postgres_stopped

pytestmark = pytest.mark.django_db(transaction=True)

redis_server, celery_on_redis, web = faults.redis_server, faults.celery_on_redis, faults.web


@pytest.fixture
def multiproc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """One metrics directory for the processes the test starts after it; /metrics open."""
    directory = tmp_path / "prometheus"
    directory.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    monkeypatch.setenv("TIDEPOOL_METRICS_OPEN", "1")
    monkeypatch.setenv("TIDEPOOL_WORKER_METRICS_PORT", str(free_port()))
    return directory


def _scrape(base: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The web process's /metrics: sample name → labels → value."""
    response = requests.get(f"{base}/metrics", timeout=10)
    assert response.status_code == 200, response.text[:500]
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def _ready(base: str) -> int:
    try:
        return requests.get(f"{base}/readyz", timeout=10).status_code
    except requests.RequestException:
        return 0


def _database_answers() -> bool:
    from django.db import OperationalError, connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except OperationalError:
        connection.close()
        return False


def test_a_workers_cycle_counts_show_on_the_web_processs_metrics(
    multiproc: Path,
    demo: Any,
    redis_server: RedisServer,
    celery_on_redis: list[faults.Supervised],
    web: str,
    eventually: Callable[..., Any],
) -> None:
    base = f"http://{web}"

    def cycles() -> float:
        return _scrape(base).get("tidepool_cycles_total", {}).get((), 0.0)

    # Only the worker runs cycles (TIDEPOOL_RUNNER=celery): the web process never does.
    eventually(lambda: cycles() >= 2, timeout=90, what="the worker's cycles on /metrics")
    figures = _scrape(base)
    assert figures["tidepool_cycle_duration_seconds_count"][(("phase", "total"),)] >= 2
    assert figures["tidepool_backend_sync_duration_seconds_count"][()] >= 1
    # The ages come from the stamps the worker left in the shared Redis.
    assert figures["tidepool_last_cycle_age_seconds"][()] < 60
    assert figures["tidepool_last_sync_age_seconds"][()] < 60
    # and the per-quota gauges from the database
    guaranteed = figures["tidepool_quota_guaranteed"]
    assert guaranteed[(("pool", "A100-80G"), ("quota", "Quota 1"), ("resource", "gpu"))] == 128
    files = {p.name.split("_")[0] for p in multiproc.iterdir()}
    assert {"counter", "histogram"} <= files
    # A worker in a pod of its own serves them on its port (TIDEPOOL_WORKER_METRICS_PORT).
    worker = f"http://127.0.0.1:{os.environ['TIDEPOOL_WORKER_METRICS_PORT']}"
    assert _scrape(worker)["tidepool_cycles_total"][()] >= 2


def test_readyz_is_unready_while_postgresql_or_redis_is_stopped_and_ready_after(
    multiproc: Path,
    demo: Any,
    redis_server: RedisServer,
    celery_on_redis: list[faults.Supervised],
    web: str,
    eventually: Callable[..., Any],
) -> None:
    from django.db import connection

    base = f"http://{web}"
    eventually(lambda: _ready(base) == 200, timeout=90, what="/readyz ready after a cycle")

    with postgres_stopped(Path(os.environ["TIDEPOOL_PGDATA"])):
        connection.close()  # this thread's session was cut
        assert _ready(base) == 503
        assert requests.get(f"{base}/healthz", timeout=10).status_code == 200
    connection.close()
    eventually(lambda: _ready(base) == 200, timeout=60, what="/readyz after PostgreSQL")
    # This process's pool reconnects too, before its teardown flushes the tables.
    eventually(_database_answers, timeout=60, what="this process's database connection")

    redis_server.stop()
    try:
        assert _ready(base) == 503
        assert requests.get(f"{base}/healthz", timeout=10).status_code == 200
    finally:
        redis_server.start()
    # Redis came back empty: ready once the worker's next cycle stamps it again.
    eventually(lambda: _ready(base) == 200, timeout=90, what="/readyz after Redis")
