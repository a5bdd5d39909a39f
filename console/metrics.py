"""The process's Prometheus metrics (counters, histograms, gauges) and the hooks that feed them.

Services import the metric objects from here and count what happened; the per-quota gauges
are read from the database at scrape time (console.metrics_view). Labels stay bounded: quota
and node-pool names, never a workload's name.

In the distributed mode every web process and Celery worker writes its samples to files in
PROMETHEUS_MULTIPROC_DIR (prometheus-client's multiprocess mode, chosen by that environment
variable when prometheus_client is first imported), and a web process's /metrics adds them up.

The last successful cycle and backend sync are stamped in the shared cache (Redis in the
distributed mode), because beat's workers run them and a web process answers the scrape.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.cache import cache
from django.db import transaction
from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

log = logging.getLogger(__name__)

MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
# No `_created` series beside each counter and histogram: they would double the per-quota ones.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Buckets in seconds: a cycle takes milliseconds to seconds; submit→Running minutes to hours.
FAST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# Few buckets for the per-quota histogram: 10 series a quota (1,000 quotas: 10,000).
WAIT_BUCKETS = (60, 300, 900, 1800, 3600, 14400, 86400)

# The core's preemption reasons (jobs.scheduling.types.REASONS) as the `kind` label says them.
PREEMPTION_KIND = {"child_preemption": "child_level"}

PREEMPTIONS = Counter(
    "tidepool_preemptions",
    "Workloads preempted, by the victim's quota and the kind of preemption.",
    ["quota", "kind"],
)
PREEMPTION_LOST = Counter(
    "tidepool_preemption_lost_gpu_seconds",
    "GPU-seconds of work lost to preemption (since the victim's last checkpoint).",
    ["quota"],
)
RESTARTS = Counter(
    "tidepool_restarts",
    "Workload restarts, by quota and cause (failure, node_lost, hang, preemption).",
    ["quota", "cause"],
)
SCALING_FIRINGS = Counter(
    "tidepool_scaling_rule_firings",
    "Scheduled scaling rules that scaled a service, by the service's quota.",
    ["quota"],
)
CYCLES = Counter(
    "tidepool_cycles",
    "Scheduling cycles run (a cycle skipped because another held the lock is not counted).",
)
CYCLES_UNSETTLED = Counter(
    "tidepool_cycles_unsettled",
    "Scheduling cycles that ran out of admission rounds with retries left: the next cycle may "
    "undo some of their decisions.",
)
CYCLE_DURATION = Histogram(
    "tidepool_cycle_duration_seconds",
    "Scheduling cycle duration, in total and by phase (snapshot, core, apply).",
    ["phase"],
    buckets=FAST_BUCKETS,
)
SUBMIT_TO_RUNNING = Histogram(
    "tidepool_submit_to_running_seconds",
    "Time from a workload's submission to all its replicas running (cluster clock).",
    ["quota"],
    buckets=WAIT_BUCKETS,
)
SYNC_DURATION = Histogram(
    "tidepool_backend_sync_duration_seconds",
    "Backend sync duration: read the cluster's reports and apply them.",
    buckets=FAST_BUCKETS,
)
HTTP_DURATION = Histogram(
    "tidepool_http_request_duration_seconds",
    "HTTP request latency by URL route (its pattern, never the raw path) and method.",
    ["route", "method"],
    buckets=FAST_BUCKETS,
)
WEBSOCKETS = Gauge(
    "tidepool_websocket_connections",
    "Open live-event websockets.",
    multiprocess_mode="livesum",
)
REPORTS = Counter(
    "tidepool_reports",
    "Reports taken from running replicas (POST /api/v1/report/), before coalescing.",
)
REPORT_STATEMENTS = Counter(
    "tidepool_report_write_statements",
    "Database statements that wrote buffered reports, by table (pod, workload, event).",
    ["table"],
)
REPORT_ROWS = Counter(
    "tidepool_report_write_rows",
    "Rows those statements wrote, by table (pod, workload, event).",
    ["table"],
)
REPORT_FLUSH_DURATION = Histogram(
    "tidepool_report_flush_duration_seconds",
    "How long writing one process's buffered reports took.",
    buckets=FAST_BUCKETS,
)

LAST_CYCLE_KEY = "tidepool:metrics:last_cycle"
LAST_SYNC_KEY = "tidepool:metrics:last_sync"


def after_commit(count: Callable[[], None]) -> None:
    """Count once the transaction commits, so a rolled-back write counts nothing."""
    transaction.on_commit(count, robust=True)


def stamp(key: str) -> None:
    """Record now (wall clock) as the last success of a periodic task, for every process.

    A cache outage must not fail the task that succeeded: the age then grows and alerts.
    """
    try:
        cache.set(key, time.time(), None)
    except Exception as error:  # the cache backend's own errors (RedisError, OSError, …)
        log.warning("could not stamp %s in the cache: %s", key, error)


def last_success(key: str) -> float | None:
    """The wall-clock time `stamp` last recorded under key, None if never (or unreadable:
    a scrape during a Redis outage still answers, its ages +Inf)."""
    try:
        value = cache.get(key)
    except Exception as error:  # the cache backend's own errors (RedisError, OSError, …)
        log.warning("could not read %s from the cache: %s", key, error)
        return None
    return float(value) if value is not None else None


@contextmanager
def timed(histogram: Histogram, **labels: str) -> Iterator[None]:
    """Observe the block's duration (also when it raises)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        target = histogram.labels(**labels) if labels else histogram
        target.observe(time.perf_counter() - started)


def _mark_dead() -> None:
    """Drop this process's live gauges from the multiprocess directory when it exits."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(os.getpid(), MULTIPROC_DIR)  # type: ignore[no-untyped-call]


if MULTIPROC_DIR:
    atexit.register(_mark_dead)


def process_registry() -> Any:
    """This process's metrics, or, in multiprocess mode, those of every process sharing the
    directory (the collectors prometheus-client offers for each)."""
    from prometheus_client import REGISTRY, CollectorRegistry, multiprocess

    if not MULTIPROC_DIR:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, MULTIPROC_DIR)  # type: ignore[no-untyped-call]
    return registry


def worker_metrics_serve(*, port: int, addr: str = "0.0.0.0") -> Any:
    """Serve the worker's counters and histograms on their own port (a Celery worker pod has no
    web server, and its metrics directory is its own): plain HTTP, no token, so a
    NetworkPolicy lets only Prometheus in. Returns the server (its port when 0 was asked)."""
    from prometheus_client import start_http_server

    server, _ = start_http_server(port, addr=addr, registry=process_registry())
    log.info("worker metrics on %s:%d", addr, server.server_port)
    return server
