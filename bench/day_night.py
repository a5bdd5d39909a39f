"""Seven simulated days of the demo scenario through the real code path, twice.

Database (scratch SQLite), task functions, simulated backend and a fast manual clock: each
simulated minute the demo traffic submits, the backend syncs, due scaling rules fire, time
limits apply, a scheduling cycle runs and usage is sampled. The same demand then runs under
static partitioning (no borrowing, no child-level preemption) for comparison.

    python bench/day_night.py --days 7 [--why-idle]
    python bench/day_night.py --days 7 --calendar demo   # shared, without and with the demo's
                                                         # quota calendar (team B's nightly loan)

`--why-idle` also files the GPUs left idle after each minute's cycle under one cause (see
`idle_causes`); it adds a snapshot per minute, so leave it off when timing the run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
START = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)  # a Monday
TICK = 60.0
IDLE_CAUSES = ("nothing_pending", "fits_but_waits", "fragmentation", "holes_too_small")


def setup(db_path: str) -> None:
    """Point Django at a scratch database and migrate it."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings.local"
    os.environ["SQLITE_PATH"] = db_path
    os.environ["DEBUG"] = "0"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _gang_fits(free: list[int], gpu: int, count: int) -> bool:
    """Whether count replicas of gpu milli-GPU fit in the free GPUs of the nodes."""
    if gpu == 0:
        return True
    return sum(f // gpu for f in free) >= count


def idle_causes(snapshot: Any, reasons: dict[str, str]) -> tuple[str, int, str]:
    """Why the GPUs idle after a cycle are idle: (cause, idle milli-GPU, a pending reason).

    `fits_but_waits`: some waiting workload would fit on the free GPUs as they lie, but the
    core kept it waiting (quota, idle policy, fair share, queue order). `fragmentation`: the
    idle GPUs add up to a waiting workload's need but are split across nodes so that it does
    not fit. `holes_too_small`: the idle GPUs add up to less than any waiting workload needs.
    """
    from jobs.scheduling.queueing import is_waiting

    free = {n.name: n.gpus * 1000 for n in snapshot.nodes if n.schedulable}
    for w in snapshot.workloads:
        for pl in w.running:
            if pl.node in free:
                free[pl.node] -= w.request.gpu
    idle = sum(free.values())
    waiting = [w for w in snapshot.workloads if is_waiting(w) and w.request.gpu > 0]
    if idle == 0:
        return ("", 0, "")
    if not waiting:
        return ("nothing_pending", idle, "")
    holes = list(free.values())
    for w in waiting:
        missing = w.replicas - len(w.running)
        if _gang_fits(holes, w.request.gpu, missing if w.is_gang else 1):
            return ("fits_but_waits", idle, reasons.get(w.name, ""))
    need = min(w.request.gpu * (w.replicas - len(w.running) if w.is_gang else 1) for w in waiting)
    return ("fragmentation" if idle >= need else "holes_too_small", idle, "")


def _team_b(days: float) -> dict[str, object]:
    """Team B's (Quota 1.1) GPU-hours allocated and its training jobs' wait to start."""
    from jobs.models import UsageSample, Workload

    minutes = UsageSample.objects.filter(quota__name="Quota 1.1").values_list(
        "gpu_in_quota", "gpu_borrowed"
    )
    waits = sorted(
        (w.started_at - w.submitted_at).total_seconds()
        for w in Workload.objects.filter(quota__name="Quota 1.1", started_at__isnull=False)
    )
    p95 = waits[min(len(waits) - 1, int(0.95 * len(waits)))] if waits else None
    return {
        "team_b_gpu_hours_allocated": round(sum(a + b for a, b in minutes) / 1000 / 60, 1),
        "team_b_wait_s": {"median": statistics.median(waits) if waits else None, "p95": p95},
        "team_b_started": len(waits),
    }


def run(
    days: int, *, static: bool, why_idle: bool = False, calendar: bool = False
) -> dict[str, object]:
    """Play `days` simulated days and measure them."""
    from django.db import connection

    from cluster.models import Node
    from console import clock as clock_module
    from console.clock import ManualClock
    from console.demo import seed_demo, seed_demo_service
    from console.traffic import DemoTraffic
    from jobs.backends import set_backend
    from jobs.backends.simulated import SimulatedBackend
    from jobs.bridge.snapshot import build, learned_target
    from jobs.choices import ENDED_STATUSES, EventKind, Kind, PodStatus, Status
    from jobs.models import Pod, UsageSample, Workload, WorkloadEvent
    from jobs.services.cycle import scheduling_cycle_run
    from jobs.services.limits import interactive_time_limits_enforce
    from jobs.services.scaling import scaling_rules_fire_due
    from jobs.services.sync import backend_sync
    from jobs.services.usage import usage_sample
    from quotas.models import Quota, QuotaResource
    from quotas.services.calendar import calendar_rules_fire_due

    clock = ManualClock(START)
    clock_module.set_clock(clock)
    backend = SimulatedBackend(start_delay=30)
    set_backend(backend)
    demo = seed_demo()
    service = seed_demo_service(now=clock.now())
    if calendar:
        from console.demo import seed_demo_calendar

        seed_demo_calendar(now=clock.now())
    if static:
        # Each team keeps a fixed slice sized for its peak: inference 64, B 24, C 40.
        QuotaResource.objects.filter(quota__name="Quota 1.1").update(min_gpu=24_000)
        QuotaResource.objects.filter(quota__name="Quota 1.2").update(min_gpu=40_000)
        Quota.objects.filter(name="Quota 1").update(child_preemption=False)
    traffic = DemoTraffic(seed=11, static=static)
    capacity = sum(Node.objects.values_list("gpus", flat=True)) * 1000
    wall = time.perf_counter()
    cycle_seconds = []
    idle_minutes: dict[str, float] = dict.fromkeys(IDLE_CAUSES, 0.0)
    idle_reasons: dict[str, float] = {}
    # cycles whose target workload differs from the last one's: each starts the scorer over
    target_changes = 0
    target = learned_target(clock.now())
    ticks = int(days * 86400 / TICK)
    for _ in range(ticks):
        clock.advance(TICK)
        now = clock.now()
        traffic()
        backend_sync(now=now, backend=backend)
        scaling_rules_fire_due(now=now)
        calendar_rules_fire_due(now=now)
        interactive_time_limits_enforce(now=now)
        t0 = time.perf_counter()
        scheduling_cycle_run(now=now, backend=backend)
        cycle_seconds.append(time.perf_counter() - t0)
        last, target = target, learned_target(now)
        target_changes += target != last
        usage_sample(now=now)
        if why_idle:
            snap = build(now)
            reasons = {name: i.workload.pending_reason for name, i in snap.workloads.items()}
            cause, idle, reason = idle_causes(snap.snapshot, reasons)
            if cause:
                idle_minutes[cause] += idle / 1000
            if reason:
                key = re.sub(r"[0-9][0-9.]*", "N", reason)[:160]
                idle_reasons[key] = idle_reasons.get(key, 0.0) + idle / 1000
    wall = time.perf_counter() - wall

    samples = list(UsageSample.objects.values_list("at", "gpu_in_quota", "gpu_borrowed"))
    by_minute: dict[datetime, int] = {}
    for at, in_quota, borrowed in samples:
        by_minute[at] = by_minute.get(at, 0) + in_quota + borrowed
    allocated = statistics.mean(v / capacity for v in by_minute.values())

    # From each 08:00 firing to all eight replicas running.
    scale_ups = WorkloadEvent.objects.filter(
        workload=service, kind=EventKind.SCALED, data__after=8
    ).values_list("at", flat=True)
    delays = []
    for fired in scale_ups:
        started = sorted(
            Pod.objects.filter(
                workload=service, started_at__gte=fired, created_at__gte=fired
            ).values_list("started_at", flat=True)
        )
        if len(started) >= 7:
            delays.append((started[6] - fired).total_seconds())

    preempted = WorkloadEvent.objects.filter(kind=EventKind.PREEMPTED).select_related("workload")
    lost = 0.0
    over_bound = 0
    bound = 0.0
    for event in preempted:
        w = event.workload
        loss = float(event.data.get("work_lost_gpu_seconds", 0))
        limit = w.checkpoint_interval * w.total_gpu / 1000
        lost += loss
        bound += limit
        over_bound += loss > limit + 1e-6

    statuses = set(Workload.objects.values_list("status", flat=True))
    known = {Status.QUEUED, Status.RUNNING, Status.REQUEUED, *ENDED_STATUSES}
    lost_workloads = Workload.objects.exclude(status__in=known).count()
    orphan_pods = Pod.objects.filter(
        workload__status__in=ENDED_STATUSES, status__in=[PodStatus.PENDING, PodStatus.RUNNING]
    ).count()
    result = {
        "gpu_alloc_pct": round(100 * allocated, 2),
        "gpu_hours_allocated": round(sum(by_minute.values()) / 1000 / 60, 1),
        **_team_b(days),
        "inference_ready_after_0800_s": {
            "median": statistics.median(delays) if delays else None,
            "max": max(delays) if delays else None,
            "days": len(delays),
        },
        "preemptions": preempted.count(),
        "gpu_hours_lost_to_preemption": round(lost / 3600, 2),
        "gpu_hours_loss_bound": round(bound / 3600, 2),
        "preemptions_over_bound": over_bound,
        "workloads": Workload.objects.count(),
        "workloads_succeeded": Workload.objects.filter(status=Status.SUCCEEDED).count(),
        "workloads_lost": lost_workloads,
        "pods_left_running_for_ended_workloads": orphan_pods,
        "training_submitted": Workload.objects.filter(kind=Kind.TRAINING).count(),
        "statuses": sorted(statuses),
        "cycle_ms_median": round(1000 * statistics.median(cycle_seconds), 2),
        "target_changes": target_changes,
        "wall_seconds": round(wall, 1),
    }
    if why_idle:
        # idle GPU-hours by cause, from one look at the cluster after each minute's cycle
        result["idle_gpu_hours_by_cause"] = {k: round(v / 60, 1) for k, v in idle_minutes.items()}
        top = sorted(idle_reasons.items(), key=lambda kv: -kv[1])[:6]
        result["idle_fits_but_waits_reasons"] = {k: round(v / 60, 1) for k, v in top}
    connection.close()
    del demo
    return result


def main() -> None:
    """Run the shared and the static configuration, each in its own scratch database."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=float, default=7)
    parser.add_argument("--mode", choices=["shared", "static", "both", "calendar"], default="both")
    parser.add_argument(
        "--calendar",
        choices=["demo"],
        help="compare shared without and with the demo's quota calendar (team B's nightly loan)",
    )
    parser.add_argument(
        "--why-idle", action="store_true", help="also break the idle GPU-hours down by cause"
    )
    parser.add_argument(
        "--placement",
        choices=["fgd", "bestfit"],
        default="fgd",
        help="the live placement (TIDEPOOL_PLACEMENT); fgd is the console's default",
    )
    args = parser.parse_args()
    os.environ["TIDEPOOL_PLACEMENT"] = args.placement  # children and this process alike
    modes = ["shared", "static"] if args.mode == "both" else [args.mode]
    if args.calendar == "demo":
        modes = ["shared", "calendar"]
    if len(modes) > 1:
        # One Django per process: run each mode in a child interpreter.
        import subprocess

        out = {}
        for mode in modes:
            proc = subprocess.run(
                [sys.executable, __file__, "--days", str(args.days), "--mode", mode]
                + (["--why-idle"] if args.why_idle else []),
                capture_output=True,
                text=True,
                check=True,
            )
            out[mode] = json.loads(proc.stdout)[mode]
        out["days"] = args.days
        out["placement"] = args.placement
        print(json.dumps(out, indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        setup(str(Path(tmp) / "bench.sqlite3"))
        print(
            json.dumps(
                {
                    modes[0]: run(
                        args.days,
                        static=modes[0] == "static",
                        why_idle=args.why_idle,
                        calendar=modes[0] == "calendar",
                    )
                }
            )
        )


if __name__ == "__main__":
    main()
