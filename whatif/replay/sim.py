"""Replay a recording through the scheduling core and a simulated cluster, in plain Python.

Each tick does what the control loop does each minute, in its order (bench/day_night.py):
arrivals and cancels, the backend sync (pods start after the start delay, training
progresses and checkpoints, recorded faults strike), scaling firings and calendar changes,
interactive time limits, scale-down, one `run_cycle`, one usage sample. The simulated
cluster's rules are jobs/backends/simulated.py's; the eviction and start rules are
jobs/bridge/plan.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from jobs.scheduling import types as core
from jobs.scheduling.cycle import run_cycle

from .types import Arrival, ConfigChange, Recording, Scaling

# Off: every tick runs a cycle, as the control loop does. On: a tick whose inputs to the core
# did not change since a cycle that decided nothing skips its cycle. Measured on the 7-day demo
# window (bench/what_if.py --skip-quiet): both runs 16.8 s → 3.3 s, but the result is not
# exactly the same (fidelity 0.04 → 0.11 points; a cycle now and then still decides something
# with unchanged inputs), so the exact path is the default.
SKIP_QUIET_CYCLES = False

Progress = Callable[[float], None]
ApplyChange = Callable[[tuple[core.Quota, ...], Mapping[str, object]], tuple[core.Quota, ...]]


class Job:
    """The replay's mutable state of one arrival."""

    __slots__ = (
        "a",
        "status",
        "placements",
        "created",
        "in_quota",
        "started_at",
        "first_start",
        "progress",
        "ckpt_progress",
        "ckpt_at",
        "progress_at",
        "failures",
        "ended_at",
        "end_status",
        "fault_at",
    )

    def __init__(self, a: Arrival) -> None:
        self.a = a
        self.status = "future"  # future → waiting ⇄ running → ended
        self.placements: list[core.Placement] = []
        self.created: list[float] = []  # when each placement's pod was created
        self.in_quota: bool | None = None
        self.started_at: float | None = None
        self.first_start: float | None = None
        self.progress = 0.0
        self.ckpt_progress = 0.0
        self.ckpt_at: float | None = None
        self.progress_at: float | None = None  # set once every replica runs
        self.failures = 0
        self.ended_at: float | None = None
        self.end_status = ""
        self.fault_at = 0  # index of the next recorded fault


@dataclass
class Outcome:
    """What one replay measured over the window [start, end]."""

    # per quota (the workloads submitted directly to it): milli-GPU-seconds
    in_quota: dict[str, float] = field(default_factory=dict)
    borrowed: dict[str, float] = field(default_factory=dict)
    preemptions: dict[str, dict[str, int]] = field(default_factory=dict)
    lost_gpu_seconds: dict[str, float] = field(default_factory=dict)
    # per workload: submit, first start, end, end status
    workloads: dict[str, tuple[str, float, float | None, float | None, str]] = field(
        default_factory=dict
    )
    # per quota: hourly mean allocated milli-GPU, and the hour starts
    hours: list[float] = field(default_factory=list)
    hourly: dict[str, list[float]] = field(default_factory=dict)
    idle_gpu_seconds: float = 0.0
    allocated_gpu_seconds: float = 0.0
    capacity: int = 0
    seconds: float = 0.0
    # inference: rule firings that raised a target, and how many had every replica placed
    # by the next cycle
    scale_ups: int = 0
    scale_ups_ready: int = 0
    cycles: int = 0
    refused_changes: list[str] = field(default_factory=list)


class Replay:
    """One run of a recording under one configuration."""

    def __init__(
        self,
        rec: Recording,
        *,
        nodes: tuple[core.Node, ...],
        quotas: tuple[core.Quota, ...],
        scalings: Sequence[Scaling],
        timed: Sequence[ConfigChange] = (),
        apply_change: ApplyChange | None = None,
        skip_quiet: bool = SKIP_QUIET_CYCLES,
    ) -> None:
        self.rec = rec
        self.nodes = nodes
        self.quotas = quotas
        self.scalings = sorted(scalings, key=lambda s: (s.at, s.service))
        self.timed = sorted(timed, key=lambda c: c.at)
        self.apply_change = apply_change
        self.skip_quiet = skip_quiet
        self.jobs = {a.name: Job(a) for a in rec.arrivals}
        self.arrivals = sorted(rec.arrivals, key=lambda a: (a.submitted_at, a.name))
        self.active: dict[str, Job] = {}
        self.targets: dict[str, int] = dict(rec.initial_replicas)
        self.out = Outcome(capacity=sum(n.gpus * core.MILLI for n in nodes if n.schedulable))
        self.dirty = True
        self.watch: list[tuple[str, int]] = []  # scale-ups to check after the next cycle

    # -- the loop ---------------------------------------------------------------------------

    def run(self, progress: Progress | None = None) -> Outcome:
        """Play every tick from the warm start to the window's end."""
        rec, tick = self.rec, self.rec.tick
        steps = max(int((rec.end - rec.warm_start) // tick), 0)
        ai = si = ci = 0
        hour_sum: dict[str, float] = {}
        hour_n = 0
        hour_start = rec.start
        for k in range(1, steps + 1):
            t = rec.warm_start + k * tick
            while ai < len(self.arrivals) and self.arrivals[ai].submitted_at <= t:
                job = self.jobs[self.arrivals[ai].name]
                job.status = "waiting"
                self.active[job.a.name] = job
                self.dirty = True
                ai += 1
            self._cancels(t)
            self._sync(t)
            while si < len(self.scalings) and self.scalings[si].at <= t:
                self._scale(self.scalings[si])
                si += 1
            while ci < len(self.timed) and self.timed[ci].at <= t:
                self._config(self.timed[ci])
                ci += 1
            self._limits(t)
            self._scale_down()
            self._cycle(t)
            if t > rec.start:
                usage = self._sample()
                for quota, milli in usage.items():
                    hour_sum[quota] = hour_sum.get(quota, 0.0) + milli
                hour_n += 1
                if t - hour_start >= 3600 or k == steps:
                    self.out.hours.append(hour_start)
                    for q in self.quotas:
                        self.out.hourly.setdefault(q.name, []).append(
                            hour_sum.get(q.name, 0.0) / hour_n
                        )
                    hour_sum, hour_n, hour_start = {}, 0, t
            if progress is not None and k % 500 == 0:
                progress(k / steps)
        self.out.seconds = max(rec.end - rec.start, 0.0)
        for job in self.jobs.values():
            a = job.a
            if rec.start <= a.submitted_at <= rec.end:
                self.out.workloads[a.name] = (
                    a.quota,
                    a.submitted_at,
                    job.first_start,
                    job.ended_at,
                    job.end_status or job.status,
                )
        return self.out

    # -- the cluster --------------------------------------------------------------------------

    def _end(self, job: Job, t: float, status: str) -> None:
        job.status, job.ended_at, job.end_status = "ended", t, status
        job.placements, job.created, job.in_quota = [], [], None
        self.active.pop(job.a.name, None)
        self.dirty = True

    def _cancels(self, t: float) -> None:
        for job in list(self.active.values()):
            if job.a.cancelled_at is not None and job.a.cancelled_at <= t:
                self._end(job, t, "Cancelled")

    def _sync(self, t: float) -> None:
        """Faults, then progress of training whose replicas all ran, then newly ready jobs."""
        delay = self.rec.start_delay
        for job in list(self.active.values()):
            a = job.a
            while job.fault_at < len(a.faults) and a.faults[job.fault_at].at <= t:
                fault = a.faults[job.fault_at]
                job.fault_at += 1
                if job.status == "running" and job.placements and a.kind != "inference":
                    self._fail(job, t, fault.node_lost)
                    break
            if job.status != "running" or a.kind != "training":
                continue
            if job.progress_at is not None:
                self._advance(job, t)
                if job.progress >= a.total_work:
                    self._end(job, t, "Succeeded")
            elif len(job.created) == a.replicas and all(c + delay <= t for c in job.created):
                job.progress_at = job.ckpt_at = t

    def _advance(self, job: Job, t: float) -> None:
        """Work since the last progress; a checkpoint on each interval boundary."""
        a = job.a
        since = job.progress_at if job.progress_at is not None else t
        rate = a.request.gpu * a.replicas / core.MILLI
        before = job.progress
        job.progress = min(before + max(t - since, 0.0) * rate, a.total_work)
        job.progress_at = t
        last = job.ckpt_at if job.ckpt_at is not None else since
        interval = a.checkpoint_interval or 1e18
        intervals = int((t - last) // interval)
        if job.progress >= a.total_work:
            job.ckpt_progress, job.ckpt_at = job.progress, t
        elif intervals > 0:
            at = last + intervals * interval
            job.ckpt_progress = before + max(at - since, 0.0) * rate
            job.ckpt_at = at

    def _lose(self, job: Job, t: float) -> None:
        """Roll the job back to its last checkpoint, counting the work lost in the window."""
        lost = max(job.progress - job.ckpt_progress, 0.0)
        if t > self.rec.start:
            q = job.a.quota
            self.out.lost_gpu_seconds[q] = self.out.lost_gpu_seconds.get(q, 0.0) + lost
        job.progress = job.ckpt_progress
        job.placements, job.created, job.in_quota = [], [], None
        job.progress_at = None
        self.dirty = True

    def _fail(self, job: Job, t: float, node_lost: bool) -> None:
        """A replica failed: requeue from the checkpoint if fault tolerance allows, else fail."""
        a = job.a
        allowed = (
            a.fault_tolerance
            and job.failures < a.max_restarts
            and (a.restart_on_node_loss if node_lost else a.restart_on_failure)
        )
        self._lose(job, t)
        if allowed:
            job.failures += 1
            job.status = "waiting"
        else:
            self._end(job, t, "Failed")

    def _scale(self, s: Scaling) -> None:
        before = self.targets.get(s.service, 0)
        self.targets[s.service] = s.replicas
        self.dirty = True
        job = self.jobs.get(s.service)
        if s.by_rule and s.replicas > before and job is not None and job.status != "ended":
            self.out.scale_ups += 1
            self.watch.append((s.service, s.replicas))

    def _config(self, c: ConfigChange) -> None:
        if self.apply_change is None:
            return
        try:
            self.quotas = self.apply_change(self.quotas, c.change)
        except ValueError as exc:
            self.out.refused_changes.append(f"{c.label}: {exc}")
        self.dirty = True

    def _limits(self, t: float) -> None:
        for job in list(self.active.values()):
            run = job.a.run_seconds
            started = job.started_at
            over = run is not None and started is not None and t - started >= run - 1e-6
            if job.status == "running" and over:
                self._end(job, t, "Stopped")

    def _scale_down(self) -> None:
        for name, target in self.targets.items():
            job = self.active.get(name)
            if job is None or len(job.placements) <= target:
                continue
            del job.placements[target:], job.created[target:]
            if not target:
                job.in_quota = None
            self.dirty = True

    # -- the core -----------------------------------------------------------------------------

    def _core_workloads(self) -> tuple[core.Workload, ...]:
        out = []
        for job in self.active.values():
            a = job.a
            replicas = self.targets.get(a.name, a.replicas) if a.kind == "inference" else a.replicas
            if not replicas and not job.placements:
                continue
            running = job.status == "running"
            out.append(
                core.Workload(
                    name=a.name,
                    quota=a.quota,
                    kind=a.kind,
                    replicas=replicas,
                    request=a.request,
                    pools=a.pools,
                    priority=a.priority,
                    idle=a.idle,
                    running=tuple(job.placements) if running else (),
                    submitted_at=a.submitted_at,
                    started_at=job.started_at if running else None,
                    last_checkpoint_at=(job.ckpt_at or job.started_at) if running else None,
                    in_quota=job.in_quota if running and job.placements else None,
                )
            )
        return tuple(out)

    def _cycle(self, t: float) -> None:
        if self.skip_quiet and not self.dirty and not self.watch:
            return
        snap = core.Snapshot(
            t, self.nodes, self.quotas, self._core_workloads(), self.rec.idle_scope
        )
        result = run_cycle(snap)
        self.out.cycles += 1
        changed = False
        for p in result.preempted:
            job = self.jobs[p.workload]
            if t > self.rec.start:
                kinds = self.out.preemptions.setdefault(job.a.quota, {})
                kinds[p.reason] = kinds.get(p.reason, 0) + 1
            self._lose(job, t)
            if job.a.fault_tolerance and job.a.restart_on_preemption:
                job.status = "waiting"
            else:
                self._end(job, t, "Failed")
            changed = True
        for adm in result.admitted:
            job = self.jobs[adm.workload]
            if job.status == "ended":
                continue
            job.placements.extend(adm.placements)
            job.created.extend([t] * len(adm.placements))
            if job.status != "running":
                job.status, job.started_at, job.ckpt_at = "running", t, t
                job.progress_at = None
                if job.first_start is None:
                    job.first_start = t
            job.in_quota = adm.in_quota
            changed = True
        for name, label in result.classification.items():
            job = self.jobs[name]
            if job.in_quota != label:
                job.in_quota, changed = label, True
        for name, target in self.watch:
            job = self.jobs[name]
            self.out.scale_ups_ready += len(job.placements) >= target
        self.watch = []
        self.dirty = changed

    def _sample(self) -> dict[str, float]:
        """Allocated milli-GPU per quota at this tick, added to the window's sums."""
        tick = self.rec.tick
        usage: dict[str, float] = {}
        total = 0
        for job in self.active.values():
            if not job.placements:
                continue
            milli = job.a.request.gpu * len(job.placements)
            q = job.a.quota
            usage[q] = usage.get(q, 0) + milli
            bucket = self.out.in_quota if job.in_quota else self.out.borrowed
            bucket[q] = bucket.get(q, 0.0) + milli * tick
            total += milli
        self.out.allocated_gpu_seconds += total * tick
        self.out.idle_gpu_seconds += max(self.out.capacity - total, 0) * tick
        return usage
