"""Record demo history to replay: the simulated demo cluster run tick by tick on a manual clock.

The same loop as bench/day_night.py (demo traffic, backend sync, scaling rules, time limits,
a scheduling cycle and a usage sample each simulated minute), so a what-if has a recorded
window to replay even on a fresh demo database.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from console import clock as clock_module
from console.clock import ManualClock
from console.demo import seed_demo, seed_demo_service
from console.traffic import DemoTraffic
from jobs.backends import set_backend
from jobs.backends.simulated import SimulatedBackend
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.limits import interactive_time_limits_enforce
from jobs.services.scaling import scaling_rules_fire_due
from jobs.services.sync import backend_sync
from jobs.services.usage import usage_sample

TICK = 60.0
START_DELAY = 30.0


def demo_history_record(*, start: datetime, hours: float, seed: int = 11) -> datetime:
    """Seed the demo at `start` and play `hours` of it; returns the end of the window."""
    clock = ManualClock(start)
    clock_module.set_clock(clock)
    backend = SimulatedBackend(start_delay=START_DELAY)
    set_backend(backend)
    seed_demo()
    seed_demo_service(now=clock.now())
    traffic = DemoTraffic(seed=seed)
    for _ in range(int(hours * 3600 / TICK)):
        clock.advance(TICK)
        now = clock.now()
        traffic()
        backend_sync(now=now, backend=backend)
        scaling_rules_fire_due(now=now)
        interactive_time_limits_enforce(now=now)
        scheduling_cycle_run(now=now, backend=backend)
        usage_sample(now=now)
    return start + timedelta(seconds=int(hours * 3600 / TICK) * TICK)
