"""GET /metrics: Prometheus's text format, behind a bearer token unless opened by a setting.

The per-quota gauges are read from the database at scrape time by one collector with a few
aggregate queries (dashboard.selectors.metrics), so they equal the quota pages' figures and
cost nothing between scrapes. The ages of the last cycle and sync are computed here from the
stamps the control loop leaves in the shared cache (console.metrics).

Access (settings): TIDEPOOL_METRICS_TOKEN set → `Authorization: Bearer <token>` is required;
TIDEPOOL_METRICS_OPEN "1" opens it to anyone, "localhost" to loopback clients only (for
`make demo`); neither → 403. It is never open by default.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from console import metrics

GPU_MILLI = 1000
CPU_MILLI = 1000
MIB = 1024 * 1024
RESOURCES = ("gpu", "cpu", "memory")
LOOPBACK = {"127.0.0.1", "::1"}
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _units(amounts: list[int] | list[int | None]) -> list[float | None]:
    """Database units (milli-GPU, millicores, MiB) as whole GPUs, cores and bytes."""
    scale = (1 / GPU_MILLI, 1 / CPU_MILLI, MIB)
    return [None if a is None else a * s for a, s in zip(amounts, scale, strict=True)]


def _gauge(name: str, documentation: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=labels)


class QuotaCollector(Collector):
    """The per-quota, per-node-pool gauges and the control loop's ages, read at scrape time."""

    def collect(self) -> Iterator[Any]:
        """Yield every family (5 queries and two cache reads)."""
        from dashboard.selectors.metrics import quota_figures

        figures = quota_figures()
        labels = ["quota", "pool", "resource"]
        families = {
            "guaranteed": _gauge(
                "tidepool_quota_guaranteed",
                "The quota's guaranteed amount (min) on the node pool: GPUs, cores, bytes.",
                labels,
            ),
            "limit": _gauge(
                "tidepool_quota_limit",
                "The quota's limit (max) on the node pool; absent when it has none.",
                labels,
            ),
            "allocated": _gauge(
                "tidepool_quota_allocated_in_quota",
                "What the quota's subtree holds In Quota on the node pool (live pods).",
                labels,
            ),
            "borrowed": _gauge(
                "tidepool_quota_borrowed",
                "What the quota's subtree holds Not in Quota (borrowed) on the node pool.",
                labels,
            ),
            "lent": _gauge(
                "tidepool_quota_lent",
                "The quota's idle guarantee on the node pool that workloads outside its "
                "subtree borrow, at most (0 when it does not lend idle).",
                labels,
            ),
            "pending": _gauge(
                "tidepool_quota_pending_demand",
                "What the subtree's waiting workloads request; pool 'any' when they may run "
                "in several node pools.",
                labels,
            ),
        }
        workloads = _gauge(
            "tidepool_quota_workloads",
            "The quota subtree's workloads on the node pool: running, pending (waiting) and "
            "borrowed (running Not in Quota).",
            ["quota", "pool", "state"],
        )
        for quota_id, pools in figures.pools.items():
            quota = figures.names[quota_id]
            for pool, row in pools.items():
                values = {
                    "guaranteed": _units(row.guaranteed),
                    "limit": _units(row.limit),
                    "allocated": _units(row.allocated),
                    "borrowed": _units(row.borrowed),
                    "lent": _units(figures.lent(quota_id, pool)),
                    "pending": _units(row.pending),
                }
                for key, amounts in values.items():
                    for resource, value in zip(RESOURCES, amounts, strict=True):
                        if value is not None:
                            families[key].add_metric([quota, pool, resource], value)
                workloads.add_metric([quota, pool, "running"], row.running)
                workloads.add_metric([quota, pool, "pending"], row.waiting)
                workloads.add_metric([quota, pool, "borrowed"], row.running_borrowed)
        yield from families.values()
        yield workloads
        yield from self.ages()

    def ages(self) -> Iterator[GaugeMetricFamily]:
        """Seconds since the last successful cycle and sync (+Inf when none was recorded)."""
        now = time.time()
        for name, key, what in (
            ("tidepool_last_cycle_age_seconds", metrics.LAST_CYCLE_KEY, "scheduling cycle"),
            ("tidepool_last_sync_age_seconds", metrics.LAST_SYNC_KEY, "backend sync"),
        ):
            last = metrics.last_success(key)
            age = float("inf") if last is None else max(0.0, now - last)
            yield GaugeMetricFamily(name, f"Seconds since the last successful {what}.", value=age)


def registry() -> CollectorRegistry:
    """This process's metrics, or every process's in multiprocess mode, and the quota gauges."""
    if metrics.MULTIPROC_DIR:
        from prometheus_client import multiprocess

        scrape = CollectorRegistry()
        multiprocess.MultiProcessCollector(scrape, metrics.MULTIPROC_DIR)  # type: ignore[no-untyped-call]
    else:
        scrape = CollectorRegistry()
        scrape.register(_Process())
    scrape.register(QuotaCollector())
    return scrape


class _Process(Collector):
    """The default registry's collectors (this process's metrics, its CPU and memory)."""

    def collect(self) -> Iterator[Any]:
        yield from REGISTRY.collect()


def allowed(request: HttpRequest) -> bool:
    """Whether the request may read /metrics (see the module's docstring)."""
    token: str = settings.TIDEPOOL_METRICS_TOKEN
    if token:
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), token):
            return True
    opened = str(settings.TIDEPOOL_METRICS_OPEN).lower()
    if opened == "localhost":
        return request.META.get("REMOTE_ADDR", "") in LOOPBACK
    return opened in {"1", "true", "yes", "on"}


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition: 403 unless the token or the open setting allows it."""
    if not allowed(request):
        return HttpResponse("Forbidden\n", status=403, content_type="text/plain")
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)


class RequestTimingMiddleware:
    """Observe each request's latency by its URL route and method.

    The route is the matched pattern (`api/v1/jobs/<id:pk>/`), never the raw path, so the
    label stays bounded; a request no route matched is "unmatched". TIDEPOOL_METRICS_HTTP=0
    leaves the middleware out (bench/api.py measures its cost).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if not settings.TIDEPOOL_METRICS_HTTP:
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        """Time the rest of the chain."""
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        route = (match.route or match.view_name) if match is not None else "unmatched"
        method = request.method if request.method in METHODS else "other"
        metrics.HTTP_DURATION.labels(route=route, method=method).observe(
            time.perf_counter() - started
        )
        return response
