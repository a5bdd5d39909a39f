"""The one clock the control loop reads: wall time, a faster simulated time, or a manual one."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the time."""

    def now(self) -> datetime:
        """The current (possibly simulated) time, timezone-aware."""
        ...


class WallClock:
    """Real time."""

    def now(self) -> datetime:
        """The real current time."""
        return datetime.now(UTC)


class SimulatedClock:
    """Time that runs `speed` times faster than real time from a chosen start."""

    def __init__(self, start: datetime, speed: float) -> None:
        self.start = start
        self.speed = speed
        self._origin = time.monotonic()

    def now(self) -> datetime:
        """Simulated time: start + real elapsed × speed."""
        return self.start + timedelta(seconds=(time.monotonic() - self._origin) * self.speed)


class ManualClock:
    """Time that moves only when told to: for tests and benchmarks."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The time as last set."""
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward."""
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, when: datetime) -> None:
        """Jump to a time."""
        self._now = when


_clock: Clock = WallClock()


def get_clock() -> Clock:
    """The clock in force."""
    return _clock


def set_clock(clock: Clock) -> Clock:
    """Install a clock (the runner at start-up, tests); returns the previous one."""
    global _clock
    previous, _clock = _clock, clock
    return previous


def now() -> datetime:
    """The current time on the clock in force."""
    return _clock.now()


def speed() -> float:
    """How many cluster seconds pass per real second: 1 on the wall, 0 on a manual clock."""
    if isinstance(_clock, ManualClock):
        return 0.0
    return float(getattr(_clock, "speed", 1.0))
