"""Chart reads: windows relative to the newest sample, bucket averages, the GPU grid."""

from __future__ import annotations

from datetime import timedelta

from cluster.models import Node
from dashboard.selectors.usage import allocation_now, node_grid, usage_series
from jobs.choices import PodStatus
from tests.dashboard.factories import T0, pod_on, running_workload, samples


def test_window_ends_at_the_newest_sample_not_at_wall_time(demo) -> None:
    q11 = demo.quotas["Quota 1.1"]
    # Two days of samples far from wall time; only the last 24 hours show.
    samples(q11, start=T0, minutes=48 * 60, in_quota=8000)
    series = usage_series()
    newest = T0 + timedelta(minutes=48 * 60 - 1)
    assert series.end == newest
    assert series.start == newest - timedelta(hours=24)
    quota = next(q for q in series.quotas if q.quota_id == q11.pk)
    assert quota.at[-1] == newest
    assert quota.at[0] > series.start
    assert len(quota.at) == 24 * 60 // 5


def test_buckets_average_gpus_and_sum_preemptions(demo) -> None:
    q1 = demo.quotas["Quota 1"]
    # Ten minutes of 8 GPUs then ten of 64: two 5-minute buckets each.
    samples(q1, start=T0, minutes=10, in_quota=8000, preemptions=1)
    samples(q1, start=T0 + timedelta(minutes=10), minutes=10, in_quota=64000, borrowed=500)
    quota = next(q for q in usage_series().quotas if q.quota_id == q1.pk)
    # Buckets end at the newest sample (minute 19): (..4], (4..9], (9..14], (14..19].
    assert quota.at == [T0 + timedelta(minutes=m) for m in (4, 9, 14, 19)]
    assert quota.in_quota == [8.0, 8.0, 64.0, 64.0]
    assert quota.preemptions == [5, 5, 0, 0]
    assert quota.borrowed[-1] == 0.5


def test_every_quota_gets_a_series_even_without_samples(demo) -> None:
    samples(demo.quotas["Quota 1"], minutes=3, in_quota=1000)
    names = [q.name for q in usage_series().quotas]
    assert names == ["Quota 1", "Quota 1.1", "Quota 1.2"]


def test_no_samples_means_no_window(demo) -> None:
    series = usage_series()
    assert series.end is None and series.quotas == []


def test_allocation_now_counts_live_pods_over_schedulable_nodes(demo) -> None:
    nodes = list(Node.objects.order_by("name")[:2])
    job = running_workload(demo, name="big", gpu=8000)
    pod_on(job, nodes[0], list(range(8)))
    done = running_workload(demo, name="done", gpu=8000)
    pod_on(done, nodes[1], list(range(8)), status=PodStatus.SUCCEEDED)
    Node.objects.filter(pk=nodes[1].pk).update(schedulable=False)
    allocation = allocation_now()
    assert allocation.allocated == 8000
    assert allocation.capacity == 15 * 8 * 1000


def test_grid_shows_free_full_shared_and_borrowed_devices(demo) -> None:
    node = Node.objects.get(name="a100-01")
    whole = running_workload(demo, name="whole", gpu=2000)
    pod_on(whole, node, [0, 1])
    lent = running_workload(demo, name="lent", gpu=1000, quota="Quota 1.2")
    pod_on(lent, node, [2], borrowed=True)
    half = running_workload(demo, name="half", gpu=500)
    pod_on(half, node, [3])
    quarter = running_workload(demo, name="quarter", gpu=250)
    pod_on(quarter, node, [4])
    pod_on(quarter, node, [4], index=1)
    pod_on(quarter, node, [4], index=2)
    pod_on(quarter, node, [4], index=3)  # four quarters fill device 4
    gone = running_workload(demo, name="gone", gpu=1000)
    pod_on(gone, node, [7], status=PodStatus.PREEMPTED)
    Node.objects.filter(name="a100-02").update(schedulable=False)

    grid = node_grid()
    first = next(n for n in grid.nodes if n.name == "a100-01")
    assert first.cells == ["full", "full", "borrowed", "shared", "full", "free", "free", "free"]
    assert first.used == 2000 + 1000 + 500 + 1000
    assert grid.counts == {"free": 16 * 8 - 5, "full": 3, "shared": 1, "borrowed": 1}
    assert grid.fragmented_nodes == 1
    assert grid.cordoned == 1
    assert next(n for n in grid.nodes if n.name == "a100-02").schedulable is False


def test_grid_filters_by_node_pool(demo) -> None:
    assert len(node_grid(node_pool_id=demo.node_pool.pk).nodes) == 16
    assert node_grid(node_pool_id=demo.node_pool.pk + 999).nodes == []
