"""The recorded window as plain values: what the replay reads (no ORM, no clock)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jobs.scheduling import types as core


@dataclass(frozen=True, slots=True)
class Fault:
    """A recorded replica failure of a workload at a time (a lost node or a crash)."""

    at: float
    node_lost: bool = False


@dataclass(frozen=True, slots=True)
class Arrival:
    """One recorded workload as submitted: its shape, policies, work and what ended it."""

    name: str
    quota: str
    kind: str
    replicas: int
    request: core.Resources
    pools: tuple[str, ...]
    submitted_at: float
    priority: int = 5
    idle: str = "none"
    total_work: float = 0.0  # GPU-seconds (training)
    checkpoint_interval: float = 1800.0
    fault_tolerance: bool = True
    max_restarts: int = 3
    restart_on_failure: bool = True
    restart_on_preemption: bool = True
    restart_on_node_loss: bool = True
    # interactive: how long it ran once started (its recorded run, or its maximum duration)
    run_seconds: float | None = None
    # cancelled or stopped by someone at this time (not by the scheduler or a limit)
    cancelled_at: float | None = None
    faults: tuple[Fault, ...] = ()


@dataclass(frozen=True, slots=True)
class Scaling:
    """A service's target replicas set at a time (a rule firing or a manual scale)."""

    at: float
    service: str
    replicas: int
    by_rule: bool = True


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """A change of the quota tree applied at a time during the replay (a calendar firing)."""

    at: float
    label: str
    change: Mapping[str, object]


@dataclass(frozen=True)
class Recording:
    """Everything one replay needs: the cluster, the tree and the window's arrivals."""

    start: float  # the measured window
    end: float
    warm_start: float  # replay from here, so work already running at `start` is in place
    nodes: tuple[core.Node, ...]
    quotas: tuple[core.Quota, ...]
    arrivals: tuple[Arrival, ...]
    scalings: tuple[Scaling, ...] = ()
    initial_replicas: Mapping[str, int] = field(default_factory=dict)
    # the tree's recorded changes during the replay (scale, rebalance, toggles), in time order
    history: tuple[ConfigChange, ...] = ()
    idle_scope: str = "tree"
    tick: float = 60.0
    start_delay: float = 30.0
    # recorded usage: quota name -> mean allocated milli-GPU over the window's samples
    recorded_alloc: Mapping[str, float] = field(default_factory=dict)
    recorded_samples: int = 0
    # what the replay had to approximate, in words for the result page
    notes: tuple[str, ...] = ()

    @property
    def capacity(self) -> int:
        """Schedulable milli-GPU of the cluster."""
        return sum(n.gpus * core.MILLI for n in self.nodes if n.schedulable)
