"""Value types of the pure scheduling core: inputs (snapshot) and outputs (decisions)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from .fragmentation import Shape

MILLI: Final = 1000  # milli-GPUs per GPU device

KINDS = ("training", "inference", "interactive")
IDLE_POLICIES = ("none", "acceptable", "idle_only")
QUEUE_STRATEGIES = ("priority", "fifo")
IDLE_SCOPES = ("tree", "pool")
# How replicas are placed: "fgd" descends the expected fragmentation under the target workload
# (jobs.scheduling.fragmentation), "bestfit" packs into the tightest node (the replay's baseline).
PLACEMENTS = ("fgd", "bestfit")
# Why a victim was evicted: reclaim (it ran on borrowed capacity), child-level preemption,
# priority within a quota, fair-share reclaim among borrowers, or a smaller min (it ran Not in
# Quota because its quota's min no longer covered it, and the capacity was taken back).
REASONS = ("reclaim", "child_preemption", "priority", "fair_share", "min")


def work_lost(milli_gpu: int, since: float | None, now: float) -> float:
    """GPU-seconds a workload holding `milli_gpu` loses if stopped at `now`: the GPU-time since
    its last checkpoint or its attempt's start (`since`; None: not started, nothing lost).

    The one figure of work lost: victim order, preemption and restart messages all use it.
    """
    if since is None:
        return 0.0
    return max(0.0, milli_gpu / MILLI * (now - since))


class ScenarioError(ValueError):
    """A snapshot or scenario that breaks the domain's invariants."""


@dataclass(frozen=True, slots=True)
class Resources:
    """A resource vector: milli-GPU, CPU millicores and memory MiB (integers only)."""

    gpu: int = 0
    cpu: int = 0
    memory: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.gpu + other.gpu, self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.gpu - other.gpu, self.cpu - other.cpu, self.memory - other.memory)

    def __mul__(self, factor: int) -> Resources:
        return Resources(self.gpu * factor, self.cpu * factor, self.memory * factor)

    def is_zero(self) -> bool:
        """True when nothing is requested."""
        return self.gpu == 0 and self.cpu == 0 and self.memory == 0


@dataclass(frozen=True, slots=True)
class Node:
    """A node of a pool; `gpus` is the device count, each device holds 1000 milli-GPU."""

    name: str
    pool: str
    gpus: int
    cpu: int
    memory: int
    schedulable: bool = True
    # What the device plugin hands out here: fractions of a GPU (a time-slicing or MPS
    # replica) and whole GPUs. A simulated node does both; a shared one only fractions.
    shares_gpus: bool = True
    whole_gpus: bool = True


@dataclass(frozen=True, slots=True)
class Quota:
    """A quota of the tree; min/max are keyed by node pool name.

    `pools` lists the node pools its workloads (and its descendants') may run in; empty
    means every pool its parent allows.
    """

    name: str
    parent: str | None
    min: Mapping[str, Resources]
    max: Mapping[str, Resources] | None = None
    child_preemption: bool = False
    lend_idle: bool = True
    weight: float | None = None
    queue: str = "priority"
    pools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one replica runs: a node and the GPU device indices it uses there."""

    node: str
    devices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Workload:
    """A training job, inference service or interactive instance; `request` is per replica."""

    name: str
    quota: str
    kind: str
    replicas: int
    request: Resources
    pools: tuple[str, ...]
    priority: int = 5
    idle: str = "none"
    running: tuple[Placement, ...] = ()
    submitted_at: float = 0
    started_at: float | None = None
    last_checkpoint_at: float | None = None
    # the running workload's current label (True = In Quota); None when unknown, and then
    # inferred in start order (see classify)
    in_quota: bool | None = None

    @property
    def preemptible(self) -> bool:
        """Only training jobs can be preempted."""
        return self.kind == "training"

    @property
    def is_gang(self) -> bool:
        """Training and interactive start all replicas or none."""
        return self.kind != "inference"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one cycle needs; `now` is the injected clock.

    `target` is the workload placement expects (task shapes with their popularity, learned by
    the bridge from recent submissions); empty means fragmentation.DEFAULT_TARGET.
    """

    now: float
    nodes: tuple[Node, ...]
    quotas: tuple[Quota, ...]
    workloads: tuple[Workload, ...]
    idle_scope: str = "tree"
    target: tuple[Shape, ...] = ()
    placement: str = "fgd"


@dataclass(frozen=True, slots=True)
class Admission:
    """A workload started (or scaled up) this cycle; only the new placements are listed."""

    workload: str
    in_quota: bool
    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class Preemption:
    """A victim, the workload it made room for and the kind of preemption that took it.

    `quota` names the quota the reason is about: the lender whose capacity a reclaimed
    borrower ran on, the parent of a child-level preemption, the quota of a priority
    preemption, or the quota whose smaller min left the victim Not in Quota.
    """

    workload: str
    by: str
    reason: str
    work_lost_gpu_seconds: float = 0.0
    quota: str = ""


@dataclass(frozen=True, slots=True)
class Demotion:
    """A running workload that lost its In-Quota label this cycle, and why.

    reason is "min" (a smaller min: `by` is empty) or "child_preemption" (`by` is the
    parent's own workload that took its place); `quota` is the quota whose min no longer
    covers it.
    """

    workload: str
    by: str
    reason: str
    quota: str


@dataclass(frozen=True, slots=True)
class Pending:
    """A workload left waiting, with one human sentence saying why."""

    workload: str
    reason: str


@dataclass(frozen=True, slots=True)
class CycleResult:
    """The cycle's decisions; classification covers every workload running after the cycle,
    demoted names every one of them that was In Quota and is not any more, and pending every
    workload left waiting that was tried: the queue's, then victims not started again.
    unsettled: the round budget ran out with retries left, so the next cycle may change what
    this one decided (a victim may take its place back)."""

    admitted: tuple[Admission, ...]
    preempted: tuple[Preemption, ...]
    classification: Mapping[str, bool]
    pending: tuple[Pending, ...]
    stats: Mapping[str, int] = field(default_factory=dict)
    demoted: tuple[Demotion, ...] = ()
    unsettled: bool = False
