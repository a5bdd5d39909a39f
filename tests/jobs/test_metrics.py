"""/metrics after a seeded demo cycle: parsed with prometheus_client's parser, its per-quota
gauges equal the quota pages' figures, and the control loop's counters count what happened."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from django.test import Client
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from console import metrics
from console.metrics_view import QuotaCollector
from dashboard.selectors.metrics import ANY_POOL
from dashboard.selectors.quotas import quota_pool_usage, subtree_usage
from jobs.choices import Status
from jobs.models import Workload
from jobs.scheduling.cycle import run_cycle
from jobs.services.scaling import service_scale
from quotas.models import Quota
from quotas.selectors import quota_subtree_ids

pytestmark = pytest.mark.django_db

QUOTA_GAUGES = [
    "tidepool_quota_guaranteed",
    "tidepool_quota_allocated_in_quota",
    "tidepool_quota_borrowed",
    "tidepool_quota_lent",
    "tidepool_quota_pending_demand",
    "tidepool_quota_workloads",
]
FAMILIES = [
    *QUOTA_GAUGES,
    "tidepool_preemptions",
    "tidepool_preemption_lost_gpu_seconds",
    "tidepool_restarts",
    "tidepool_scaling_rule_firings",
    "tidepool_cycle_duration_seconds",
    "tidepool_submit_to_running_seconds",
    "tidepool_backend_sync_duration_seconds",
    "tidepool_http_request_duration_seconds",
    "tidepool_last_cycle_age_seconds",
    "tidepool_last_sync_age_seconds",
    "tidepool_websocket_connections",
]


@pytest.fixture
def open_metrics(settings: Any) -> None:
    settings.TIDEPOOL_METRICS_TOKEN = ""
    settings.TIDEPOOL_METRICS_OPEN = "1"


@pytest.fixture
def committed(django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """Call a function and run the on-commit callbacks it left (the counters count at commit),
    which the test's transaction would otherwise never run."""

    def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return function(*args, **kwargs)

    return call


@pytest.fixture
def tick(tick: Callable[..., None], committed: Callable[..., Any]) -> Callable[..., None]:
    """conftest's tick, its on-commit callbacks run."""
    return lambda *args, **kwargs: committed(tick, *args, **kwargs)


def scrape(client: Client) -> dict[str, Any]:
    """GET /metrics, parsed: family name → family."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def samples(family: Any, **labels: str) -> dict[tuple[str, ...], float]:
    """(quota, pool) → value of the family's samples that carry `labels`."""
    return {
        (s.labels["quota"], s.labels["pool"]): s.value
        for s in family.samples
        if all(s.labels.get(k) == v for k, v in labels.items())
    }


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def busy(bob: Any, carol: Any, submit: Callable[..., Workload], tick: Callable[..., None]) -> None:
    """Bob runs In Quota and borrows; Carol waits behind a job too big for the cluster."""
    submit(bob, "own", replicas=6)  # Quota 1.1's 48 GPUs
    tick(1)
    submit(bob, "hi", priority=9, idle_policy="acceptable")  # borrows 8 more
    submit(carol, "small", replicas=2)
    tick(1)
    tick(30)  # pods start
    submit(carol, "huge", replicas=12)  # 96 GPUs, over Quota 1.2's 80 and borrowing none: it waits
    tick(1)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "stock"])
def test_metrics_after_a_demo_cycle_has_every_family_and_the_quota_pages_figures(
    open_metrics: None, busy: None, client: Client, tick: Any, settings: Any, fast: bool
) -> None:
    settings.TIDEPOOL_FAST_PATHS = fast
    tick(1)
    families = scrape(client)
    missing = [name for name in FAMILIES if name not in families]
    assert not missing, missing

    allocated = samples(families["tidepool_quota_allocated_in_quota"], resource="gpu")
    borrowed = samples(families["tidepool_quota_borrowed"], resource="gpu")
    guaranteed = samples(families["tidepool_quota_guaranteed"], resource="gpu")
    pending = samples(families["tidepool_quota_pending_demand"], resource="gpu")
    usage = subtree_usage()
    for quota in Quota.objects.all():
        # The quota page's Usage tab: allocated and borrowed per node pool, in milli-GPU.
        for row in quota_pool_usage(quota, quota_subtree_ids(quota)):
            assert allocated[quota.name, row.node_pool] == row.subtree_allocated / 1000
            assert borrowed.get((quota.name, row.node_pool), 0) == row.subtree_borrowed / 1000
            assert guaranteed[quota.name, row.node_pool] == row.guaranteed / 1000
        # The quota API's usage (attach_usage): In Quota, borrowed, pending over all pools.
        in_quota, lent_out, waiting = usage[quota.pk]
        mine = {k: v for k, v in allocated.items() if k[0] == quota.name}
        assert sum(mine.values()) == in_quota / 1000
        assert sum(v for k, v in borrowed.items() if k[0] == quota.name) == lent_out / 1000
        assert sum(v for k, v in pending.items() if k[0] == quota.name) == waiting / 1000

    assert allocated["Quota 1.1", "A100-80G"] == 48
    assert borrowed["Quota 1.1", "A100-80G"] == 8
    assert pending["Quota 1.2", "A100-80G"] == 96  # huge names the pool: counted there
    assert ("Quota 1.2", ANY_POOL) not in pending
    workloads = families["tidepool_quota_workloads"]
    assert samples(workloads, state="running")["Quota 1.1", "A100-80G"] == 2
    assert samples(workloads, state="borrowed")["Quota 1.1", "A100-80G"] == 1
    assert samples(workloads, state="pending")["Quota 1", "A100-80G"] == 1  # the subtree's
    # Quota 1.2 lends the idle part of its 80 GPUs; Bob's borrowed 8 are outside its subtree.
    lent = samples(families["tidepool_quota_lent"], resource="gpu")
    assert lent["Quota 1.2", "A100-80G"] == 8
    assert ("Quota 1.1", "A100-80G") not in lent  # 0: absent
    memory = samples(families["tidepool_quota_allocated_in_quota"], resource="memory")
    job = Workload.objects.get(name="own")
    assert memory["Quota 1.1", "A100-80G"] == job.memory * job.replicas * 1024 * 1024

    ages = families["tidepool_last_cycle_age_seconds"].samples[0].value
    assert 0 <= ages < 60
    assert families["tidepool_last_sync_age_seconds"].samples[0].value < 60
    phases = {
        s.labels["phase"]
        for s in families["tidepool_cycle_duration_seconds"].samples
        if s.name.endswith("_count") and s.value > 0
    }
    assert phases == {"total", "snapshot", "core", "apply"}


def test_the_fast_path_writes_the_samples_the_library_writes(
    open_metrics: None, busy: None, client: Client, settings: Any
) -> None:
    def quota_samples() -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
        return {
            (s.name, tuple(sorted(s.labels.items())), s.value)
            for family in scrape(client).values()
            if family.name.startswith("tidepool_quota_")
            for s in family.samples
        }

    settings.TIDEPOOL_FAST_PATHS = True
    fast = quota_samples()
    settings.TIDEPOOL_FAST_PATHS = False
    assert fast == quota_samples()
    assert len(fast) > 20


def test_label_values_are_escaped_as_the_text_format_wants() -> None:
    from console.metrics_view import Family, families_text

    family = Family("tidepool_quota_guaranteed", "help", ("quota", "pool", "resource"))
    family.samples.append((('team "a"\\b\nc', "A100", "gpu"), 1.5))
    (parsed,) = text_string_to_metric_families(families_text([family]))
    assert parsed.samples[0].labels["quota"] == 'team "a"\\b\nc'
    assert parsed.samples[0].value == 1.5


def test_quota_gauges_take_a_fixed_number_of_queries(
    demo: Any, busy: None, django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(4):
        list(QuotaCollector().collect())


def test_ages_are_infinite_before_any_cycle(demo: Any, settings: Any) -> None:
    from django.core.cache import cache

    cache.delete_many([metrics.LAST_CYCLE_KEY, metrics.LAST_SYNC_KEY])
    ages = {f.name: f.samples[0].value for f in QuotaCollector().ages()}
    assert ages["tidepool_last_cycle_age_seconds"] == float("inf")


def test_a_reclaim_counts_a_preemption_its_lost_work_and_a_restart(
    bob: Any, submit: Any, service: Workload, tick: Any, clock: Any, committed: Any
) -> None:
    submit(bob, "own", replicas=6, total_work=48 * 8 * 3600)
    tick(1)
    borrowed = submit(
        bob, "borrowed", replicas=5, idle_policy="acceptable", checkpoint_interval=600
    )
    tick(1)
    tick(30)
    tick(1500)
    before = {
        "preempted": counter("tidepool_preemptions_total", quota="Quota 1.1", kind="reclaim"),
        "lost": counter("tidepool_preemption_lost_gpu_seconds_total", quota="Quota 1.1"),
        "restarts": counter("tidepool_restarts_total", quota="Quota 1.1", cause="preemption"),
    }
    service_scale(service=service, replicas=8, now=clock.now(), reason="rule day")
    tick()
    borrowed.refresh_from_db()
    assert borrowed.status == Status.REQUEUED
    lost = borrowed.events.get(kind="preempted").data["work_lost_gpu_seconds"]
    after = {
        "preempted": counter("tidepool_preemptions_total", quota="Quota 1.1", kind="reclaim"),
        "lost": counter("tidepool_preemption_lost_gpu_seconds_total", quota="Quota 1.1"),
        "restarts": counter("tidepool_restarts_total", quota="Quota 1.1", cause="preemption"),
    }
    assert after["preempted"] - before["preempted"] == 1
    assert after["lost"] - before["lost"] == pytest.approx(lost)
    assert after["restarts"] - before["restarts"] == 1


def test_a_cycle_out_of_admission_rounds_is_counted_and_logged(
    bob: Any,
    submit: Any,
    service: Workload,
    tick: Any,
    clock: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    submit(bob, "own", replicas=6)
    tick(1)
    submit(bob, "borrowed", replicas=5, idle_policy="acceptable")
    tick(1)
    tick(30)
    before = counter("tidepool_cycles_unsettled_total")
    tick()  # a cycle with nothing to retry
    assert counter("tidepool_cycles_unsettled_total") == before
    # the real core with a budget of one round: the reclaim's victim is not retried in it
    monkeypatch.setattr("jobs.bridge.plan.run_cycle", partial(run_cycle, rounds=1))
    service_scale(service=service, replicas=8, now=clock.now(), reason="rule day")
    with caplog.at_level(logging.WARNING, logger="jobs.services.cycle"):
        tick()
    assert Workload.objects.get(name="borrowed").status == Status.REQUEUED
    assert counter("tidepool_cycles_unsettled_total") == before + 1
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    (record,) = [r for r in warned if r.name == "jobs.services.cycle"]
    assert "ran out of admission rounds" in record.getMessage()


def test_a_crash_counts_a_restart_by_cause_and_start_waits_are_observed(
    bob: Any, submit: Any, tick: Any, sim: Any, committed: Any
) -> None:
    waits = counter("tidepool_submit_to_running_seconds_count", quota="Quota 1.1")
    job = submit(bob, "flaky", max_restarts=2, total_work=8 * 36000)
    tick()
    tick(30)
    assert counter("tidepool_submit_to_running_seconds_count", quota="Quota 1.1") == waits + 1
    assert counter("tidepool_submit_to_running_seconds_sum", quota="Quota 1.1") >= 30
    crashes = counter("tidepool_restarts_total", quota="Quota 1.1", cause="failure")
    sim.inject_pod_crash(job.pods.get(status="Running"), exit_code=137)
    tick(60)
    assert counter("tidepool_restarts_total", quota="Quota 1.1", cause="failure") == crashes + 1


def test_a_scaling_rule_firing_is_counted(service: Workload, clock: Any, committed: Any) -> None:
    from jobs.services.scaling import scaling_rule_create, scaling_rules_fire_due

    scaling_rule_create(
        service=service,
        name="up",
        cron="* * * * *",
        timezone="UTC",
        target_replicas=2,
        now=clock.now(),
    )
    before = counter("tidepool_scaling_rule_firings_total", quota="Quota 1")
    clock.advance(120)
    assert committed(scaling_rules_fire_due, now=clock.now()) == 1
    assert counter("tidepool_scaling_rule_firings_total", quota="Quota 1") == before + 1


def test_request_latency_is_labelled_by_route_never_by_path(
    open_metrics: None, bob: Any, client: Client, login: Any
) -> None:
    api = login(bob)
    api.get("/api/v1/jobs/999999/")
    families = scrape(client)
    routes = {s.labels["route"] for s in families["tidepool_http_request_duration_seconds"].samples}
    assert not any("999999" in r for r in routes)
    assert any(r.startswith("api/v1/") and "jobs" in r for r in routes), routes


def test_each_cycle_logs_its_summary(
    bob: Any, submit: Any, tick: Any, caplog: pytest.LogCaptureFixture
) -> None:
    submit(bob, "one", replicas=1)
    with caplog.at_level(logging.INFO, logger="jobs.services.cycle"):
        tick()
    (record,) = [r for r in caplog.records if r.name == "jobs.services.cycle"]
    assert (record.admitted, record.preempted, record.pending) == (1, 0, 0)  # type: ignore[attr-defined]
    assert record.duration > 0  # type: ignore[attr-defined]


def test_every_metric_the_dashboards_and_alerts_query_is_served_with_its_labels(
    open_metrics: None, busy: None, client: Client, tick: Any
) -> None:
    from tests.deploy.promql import metric_list

    tick(1)
    families = scrape(client)
    for metric in metric_list().values():
        family = families.get(metric.name.removesuffix("_total"))
        assert family is not None, f"{metric.name} is not on /metrics"
        assert family.type == metric.type, metric.name
        for sample in family.samples:
            assert set(sample.labels) - {"le"} <= metric.labels, (metric.name, sample.labels)
