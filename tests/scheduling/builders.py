"""Fluent builders for scheduling tests: workload("train").gpus(8), quota("q1").min(gpu=48)."""

from __future__ import annotations

from jobs.scheduling.types import MILLI, Node, Placement, Quota, Resources, Snapshot, Workload

POOL = "a100"


def milli(gpus: float) -> int:
    """GPUs as milli-GPU."""
    return round(gpus * MILLI)


class WorkloadBuilder:
    """Builds a Workload; every setter returns the builder."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._quota = "q1"
        self._kind = "training"
        self._replicas = 1
        self._gpu = 0
        self._cpu = 0
        self._memory = 0
        self._pools: tuple[str, ...] = (POOL,)
        self._priority = 5
        self._idle = "none"
        self._running: tuple[Placement, ...] = ()
        self._submitted = 0.0
        self._started: float | None = None
        self._ckpt: float | None = None
        self._label: bool | None = None

    def quota(self, q: str) -> WorkloadBuilder:
        self._quota = q
        return self

    def kind(self, k: str) -> WorkloadBuilder:
        self._kind = k
        return self

    def inference(self) -> WorkloadBuilder:
        return self.kind("inference")

    def interactive(self) -> WorkloadBuilder:
        return self.kind("interactive")

    def replicas(self, n: int) -> WorkloadBuilder:
        self._replicas = n
        return self

    def gpus(self, g: float) -> WorkloadBuilder:
        self._gpu = milli(g)
        return self

    def cpu(self, c: int) -> WorkloadBuilder:
        self._cpu = c
        return self

    def memory(self, m: int) -> WorkloadBuilder:
        self._memory = m
        return self

    def pools(self, *p: str) -> WorkloadBuilder:
        self._pools = p
        return self

    def priority(self, p: int) -> WorkloadBuilder:
        self._priority = p
        return self

    def idle(self, i: str) -> WorkloadBuilder:
        self._idle = i
        return self

    def on(self, *nodes: str) -> WorkloadBuilder:
        """Running, one replica per node name (devices assigned by the core)."""
        self._running = tuple(Placement(n) for n in nodes)
        if self._replicas < len(nodes):
            self._replicas = len(nodes)
        if self._started is None:
            self._started = self._submitted
        return self

    def submitted(self, t: float) -> WorkloadBuilder:
        self._submitted = t
        return self

    def started(self, t: float) -> WorkloadBuilder:
        self._started = t
        return self

    def checkpoint(self, t: float) -> WorkloadBuilder:
        self._ckpt = t
        return self

    def labelled(self, in_quota: bool) -> WorkloadBuilder:
        """The running workload's current label (unknown, so inferred, when not set)."""
        self._label = in_quota
        return self

    def build(self) -> Workload:
        return Workload(
            name=self._name,
            quota=self._quota,
            kind=self._kind,
            replicas=self._replicas,
            request=Resources(self._gpu, self._cpu, self._memory),
            pools=self._pools,
            priority=self._priority,
            idle=self._idle,
            running=self._running,
            submitted_at=self._submitted,
            started_at=self._started,
            last_checkpoint_at=self._ckpt,
            in_quota=self._label,
        )


class QuotaBuilder:
    """Builds a Quota."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._parent: str | None = None
        self._min: dict[str, Resources] = {}
        self._max: dict[str, Resources] | None = None
        self._child_preemption = False
        self._lend = True
        self._weight: float | None = None
        self._queue = "priority"
        self._pools: tuple[str, ...] = ()

    def parent(self, p: str) -> QuotaBuilder:
        self._parent = p
        return self

    def min(self, gpu: float = 0, cpu: int = 0, memory: int = 0, pool: str = POOL) -> QuotaBuilder:
        self._min[pool] = Resources(milli(gpu), cpu, memory)
        return self

    def max(self, gpu: float = 0, cpu: int = 0, memory: int = 0, pool: str = POOL) -> QuotaBuilder:
        if self._max is None:
            self._max = {}
        self._max[pool] = Resources(milli(gpu), cpu, memory)
        return self

    def child_preemption(self, on: bool = True) -> QuotaBuilder:
        self._child_preemption = on
        return self

    def lend_idle(self, on: bool) -> QuotaBuilder:
        self._lend = on
        return self

    def weight(self, w: float) -> QuotaBuilder:
        self._weight = w
        return self

    def fifo(self) -> QuotaBuilder:
        self._queue = "fifo"
        return self

    def pools(self, *p: str) -> QuotaBuilder:
        """The only node pools its workloads (and its descendants') may run in."""
        self._pools = p
        return self

    def build(self) -> Quota:
        return Quota(
            self._name,
            self._parent,
            dict(self._min),
            None if self._max is None else dict(self._max),
            self._child_preemption,
            self._lend,
            self._weight,
            self._queue,
            self._pools,
        )


def workload(name: str) -> WorkloadBuilder:
    """Start building a workload (training, 1 replica, pool a100, priority 5)."""
    return WorkloadBuilder(name)


def quota(name: str) -> QuotaBuilder:
    """Start building a quota."""
    return QuotaBuilder(name)


def nodes(
    count: int,
    gpus: int = 8,
    pool: str = POOL,
    prefix: str = "n",
    cpu: int = 96_000,
    memory: int = 786_432,
) -> list[Node]:
    """count identical nodes named n1..nN."""
    return [Node(f"{prefix}{i}", pool, gpus, cpu, memory) for i in range(1, count + 1)]


def snapshot(
    node_list: list[Node],
    quotas: list[QuotaBuilder | Quota],
    workloads: list[WorkloadBuilder | Workload],
    now: float = 1000,
    idle_scope: str = "tree",
) -> Snapshot:
    """A Snapshot from builders or built values."""
    qs = tuple(q.build() if isinstance(q, QuotaBuilder) else q for q in quotas)
    ws = tuple(w.build() if isinstance(w, WorkloadBuilder) else w for w in workloads)
    return Snapshot(now, tuple(node_list), qs, ws, idle_scope)
