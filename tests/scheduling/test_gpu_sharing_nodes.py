"""Nodes whose device plugin shares GPUs (time-slicing, MPS) take fractions only, and nodes
that do not share take whole GPUs only; simulated nodes (the default) take both."""

from __future__ import annotations

import dataclasses

import pytest

from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import Node

from .builders import nodes, quota, snapshot, workload


def cluster(sharing: str) -> list[Node]:
    """Two 8-GPU nodes: `plain` and `shared`, where `shared` hands out as `sharing` says."""
    plain, shared = nodes(2)
    plain = dataclasses.replace(plain, name="plain", shares_gpus=False, whole_gpus=True)
    both = sharing == "any"
    shared = dataclasses.replace(shared, name="shared", shares_gpus=True, whole_gpus=both)
    return [plain, shared]


@pytest.mark.parametrize(
    ("gpus", "sharing", "placed_on"),
    [
        (0.5, "time-slicing", {"shared"}),
        (1, "time-slicing", {"plain"}),
        (8, "time-slicing", {"plain"}),
        (0.5, "any", {"shared"}),  # a simulated node takes fractions too
    ],
    ids=["fraction-to-sharing", "one-gpu-to-plain", "eight-to-plain", "any-node-takes-fractions"],
)
def test_gpu_requests_go_only_to_nodes_that_hand_them_out(
    gpus: float, sharing: str, placed_on: set[str]
) -> None:
    snap = snapshot(
        cluster(sharing),
        [quota("q").min(gpu=16)],
        [workload("w").quota("q").gpus(gpus).replicas(2 if gpus == 0.5 else 1)],
    )
    (admission,) = run_cycle(snap).admitted
    assert {p.node for p in admission.placements} == placed_on


def test_whole_gpus_wait_rather_than_take_a_time_sliced_node() -> None:
    busy = workload("busy").quota("q").gpus(8).started(1).on("plain")
    snap = snapshot(
        cluster("time-slicing"), [quota("q").min(gpu=16)], [busy, workload("w").quota("q").gpus(8)]
    )
    result = run_cycle(snap)
    assert result.admitted == ()
    assert [p.workload for p in result.pending] == ["w"]
    # `plain` is busy and `shared` has the room, but not the kind of GPU: the reason says so
    assert result.pending[0].reason == (
        "the nodes of pool a100 with 8 free GPUs do not hand out whole GPUs"
    )
    # a pool of only sharing nodes says that instead
    only = run_cycle(
        snapshot(
            cluster("time-slicing")[1:], [quota("q").min(gpu=8)], [workload("w").quota("q").gpus(8)]
        )
    )
    assert "hand out shares of GPUs (time-slicing), not whole GPUs" in only.pending[0].reason


def test_a_fraction_waits_rather_than_take_a_node_that_does_not_share() -> None:
    plain = [dataclasses.replace(n, shares_gpus=False) for n in nodes(2)]
    snap = snapshot(plain, [quota("q").min(gpu=16)], [workload("w").quota("q").gpus(0.5)])
    result = run_cycle(snap)
    assert result.admitted == () and [p.workload for p in result.pending] == ["w"]
    assert "no node in pool a100 shares its GPUs, as a fraction of a GPU needs" in (
        result.pending[0].reason
    )


def test_a_fraction_waits_while_only_a_node_that_does_not_share_has_room() -> None:
    # `shared` is full; `plain` has 8 free GPUs but hands out whole ones only
    busy = workload("busy").quota("q").gpus(8).started(1).on("shared")
    wait = workload("w").quota("q").gpus(0.5)
    result = run_cycle(snapshot(cluster("time-slicing"), [quota("q").min(gpu=16)], [busy, wait]))
    assert result.admitted == ()
    assert result.pending[0].reason == (
        "the nodes of pool a100 with a GPU with 0.5 free do not hand out shares of a GPU"
    )
