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
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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


@dataclass
class Family:
    """One gauge family of the quota figures: its samples as (label values, value)."""

    name: str
    documentation: str
    labels: tuple[str, ...]
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)


QUOTA_LABELS = ("quota", "pool", "resource")
# (figure, metric name, help, whether a 0 is written: the sparse ones are absent at 0)
QUOTA_FAMILIES = (
    (
        "guaranteed",
        "tidepool_quota_guaranteed",
        "The quota's guaranteed amount (min) on the node pool: GPUs, cores, bytes.",
        True,
    ),
    (
        "limit",
        "tidepool_quota_limit",
        "The quota's limit (max) on the node pool; absent when it has none.",
        True,
    ),
    (
        "allocated",
        "tidepool_quota_allocated_in_quota",
        "What the quota's subtree holds In Quota on the node pool (live pods).",
        True,
    ),
    (
        "borrowed",
        "tidepool_quota_borrowed",
        "What the quota's subtree holds Not in Quota (borrowed) on the node pool; absent at 0.",
        False,
    ),
    (
        "lent",
        "tidepool_quota_lent",
        "The quota's idle guarantee on the node pool that workloads outside its subtree "
        "borrow, at most (none when it does not lend idle); absent at 0.",
        False,
    ),
    (
        "pending",
        "tidepool_quota_pending_demand",
        "What the subtree's waiting workloads request on the node pool (pool 'any' when they "
        "may run in several); absent at 0.",
        False,
    ),
)


def quota_families() -> list[Family]:
    """The per-quota, per-node-pool gauges from the database (4 queries).

    Guaranteed, limit, allocated In Quota and running workloads are written for every quota
    and node pool it has amounts on or uses; borrowed, lent, pending demand and the pending
    and borrowed workload counts only when not 0, which keeps 1,000 quotas under 20,000
    series (bench/metrics.py). A query for "> 0" reads the same either way.
    """
    from dashboard.selectors.metrics import quota_figures

    figures = quota_figures()
    families = {
        key: Family(name, documentation, QUOTA_LABELS)
        for key, name, documentation, _ in QUOTA_FAMILIES
    }
    dense = {key for key, _, _, always in QUOTA_FAMILIES if always}
    workloads = Family(
        "tidepool_quota_workloads",
        "The quota subtree's workloads on the node pool: running, pending (waiting) and "
        "borrowed (running Not in Quota); pending and borrowed absent at 0.",
        ("quota", "pool", "state"),
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
                samples = families[key].samples
                keep_zero = key in dense
                for resource, value in zip(RESOURCES, amounts, strict=True):
                    if value is not None and (value or keep_zero):
                        samples.append(((quota, pool, resource), value))
            workloads.samples.append(((quota, pool, "running"), row.running))
            if row.waiting:
                workloads.samples.append(((quota, pool, "pending"), row.waiting))
            if row.running_borrowed:
                workloads.samples.append(((quota, pool, "borrowed"), row.running_borrowed))
    return [*families.values(), workloads]


def _escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    """A sample value as the text format writes it."""
    if value.__class__ is int:
        return f"{value}.0"
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if value != value:
        return "NaN"
    return repr(float(value))


def families_text(families: list[Family]) -> str:
    """The families in Prometheus's text format, written directly (the fast path).

    Each label value is escaped once however many samples carry it (a quota's name is on
    about twenty).
    """
    escaped: dict[str, str] = {}

    def esc(value: str) -> str:
        text = escaped.get(value)
        if text is None:
            text = escaped[value] = _escape(value)
        return text

    out: list[str] = []
    for family in families:
        doc = family.documentation.replace("\\", "\\\\").replace("\n", "\\n")
        name = family.name
        out.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n")
        first, second, third = family.labels
        for (a, b, c), value in family.samples:
            out.append(
                f'{name}{{{first}="{esc(a)}",{second}="{esc(b)}",{third}="{esc(c)}"}} '
                f"{_number(value)}\n"
            )
    return "".join(out)


class QuotaCollector(Collector):
    """The per-quota, per-node-pool gauges and the control loop's ages, read at scrape time."""

    def collect(self) -> Iterator[Any]:
        """Yield every family (4 queries and two cache reads)."""
        for family in quota_families():
            gauge = GaugeMetricFamily(family.name, family.documentation, labels=list(family.labels))
            for values, value in family.samples:
                gauge.add_metric(list(values), value)
            yield gauge
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


def registry(*, quotas: bool = True) -> CollectorRegistry:
    """This process's metrics, or every process's in multiprocess mode, and the quota gauges
    (left out for the fast path, which writes them itself)."""
    scrape = CollectorRegistry()
    if metrics.MULTIPROC_DIR:
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(scrape, metrics.MULTIPROC_DIR)  # type: ignore[no-untyped-call]
    else:
        scrape.register(_Process())
    scrape.register(QuotaCollector() if quotas else _Ages())
    return scrape


def exposition() -> bytes:
    """The whole scrape. With TIDEPOOL_FAST_PATHS the quota gauges (most of the series) are
    written by families_text instead of prometheus_client's per-sample formatting; the same
    samples either way (tests/jobs/test_metrics.py)."""
    from console import fast

    if not fast.on():
        return generate_latest(registry())
    return generate_latest(registry(quotas=False)) + families_text(quota_families()).encode()


class _Ages(Collector):
    """The control loop's ages alone (the fast path writes the quota gauges itself)."""

    def collect(self) -> Iterator[Any]:
        yield from QuotaCollector().ages()


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
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


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
