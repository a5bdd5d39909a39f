"""The cluster dashboard shows the placement target and the fragmentation per node pool."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from cluster.choices import GpuSharing
from cluster.models import Node
from console import clock as clock_module
from console.clock import ManualClock
from jobs.models import Workload
from tests.dashboard.factories import T0, pod_on, running_workload


@pytest.fixture
def at_t0() -> Iterator[None]:
    previous = clock_module.set_clock(ManualClock(T0 + timedelta(hours=1)))
    yield
    clock_module.set_clock(previous)


def _rows(html: str, testid: str) -> str:
    start = html.index(f'data-testid="{testid}"')
    return html[start : html.index("</section>", start)]


def test_the_default_mix_until_something_with_a_gpu_is_submitted(
    demo: Any, login: Any, admin: Any, at_t0: None
) -> None:
    Workload.objects.all().delete()
    html = login(admin).get(reverse("dashboard:cluster")).content.decode()
    target = _rows(html, "placement-target")
    assert "the default mix" in target
    assert "in the 7 days before <time" in target
    assert ">2026-12-01 01:00 UTC</time>" in target  # the clock's last 10-minute mark
    # 50 of 100 tasks take 1 GPU, 3 take 8: per device they weigh 50 and 3/8 of 90.125
    assert '<td>1 GPU</td><td class="num">55%</td>' in target
    assert '<td>8 GPUs</td><td class="num">0.4%</td>' in target
    # nothing runs: no free GPU is stranded
    assert "(0%)" in _rows(html, "pool-fragmentation")


def test_the_learned_target_and_a_half_device_left_over(
    demo: Any, login: Any, admin: Any, at_t0: None
) -> None:
    Workload.objects.all().delete()
    node = Node.objects.select_related("node_pool").order_by("name").first()
    assert node is not None
    running_workload(demo, name="whole", gpu=1000)
    half = running_workload(demo, name="half", gpu=500)
    pod_on(half, node, [0])
    html = login(admin).get(reverse("dashboard:cluster")).content.decode()
    target = _rows(html, "placement-target")
    assert "by share of tasks" in target
    assert "in the 7 days before <time" in target and "(up to 10,000 workloads)" in target
    assert "learned again every 10 minutes" in target
    assert '<td>1 GPU</td><td class="num">50%</td>' in target
    assert '<td>0.5 GPU</td><td class="num">50%</td>' in target
    # the half device left on the node is of no use to the 1-GPU half of the mix: 0.25 GPU
    pools = _rows(html, "pool-fragmentation")
    row = pools[pools.index(f"<td>{node.node_pool.name}</td>") :]
    assert row.split("</tr>")[0].count("0.25 (") == 1


def test_a_time_sliced_node_strands_its_gpus_for_whole_gpu_tasks(
    demo: Any, login: Any, admin: Any, at_t0: None
) -> None:
    # the target is half whole GPUs, half half-GPUs; a time-sliced node hands out fractions
    # only, so for the whole-GPU half of the mix every free GPU on it is stranded
    Workload.objects.all().delete()
    node = Node.objects.select_related("node_pool").order_by("name").first()
    assert node is not None
    Node.objects.filter(node_pool=node.node_pool).exclude(pk=node.pk).update(schedulable=False)
    node.gpu_sharing = GpuSharing.TIME_SLICING
    node.save(update_fields=["gpu_sharing"])
    running_workload(demo, name="whole", gpu=1000)
    running_workload(demo, name="half", gpu=500)
    html = login(admin).get(reverse("dashboard:cluster")).content.decode()
    pools = _rows(html, "pool-fragmentation")
    row = pools[pools.index(f"<td>{node.node_pool.name}</td>") :].split("</tr>")[0]
    assert f"{node.gpus / 2:g} (50%)" in row
