"""Serve the console with the embedded control loop: simulated time and traffic, or a real cluster.

The server is uvicorn (httptools, uvloop, websockets) on console.serving's app: HTTP requests
run Django's sync handler in one hop to a long-lived thread, websockets go through Channels.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, time
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from console import clock
from console.clock import SimulatedClock, WallClock
from console.demo import seed_demo_calendar, seed_demo_notebooks, seed_demo_service
from console.runner import Runner
from console.serving import application, serve
from console.traffic import DemoTraffic
from jobs.models import ControlState

WHITENOISE = "whitenoise.middleware.WhiteNoiseMiddleware"


class Command(BaseCommand):
    """`python manage.py serve --port 8000`: what `make demo` runs."""

    help = "Run the ASGI console with the in-process runner on a simulated cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        """Port, speed and whether to generate demo traffic."""
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--speed", type=float, default=settings.SIM_SPEED)
        parser.add_argument("--no-traffic", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        """Start the clock and the control loop, then serve until Ctrl-C."""
        if settings.TIDEPOOL_BACKEND == "simulated":
            runner = self._simulated(options)
        else:
            # A real cluster lives in real time: no simulated clock, no demo traffic.
            clock.set_clock(WallClock())
            runner = Runner(speed=1.0)
            self.stdout.write(f"Cluster backend {settings.TIDEPOOL_BACKEND}, wall clock.")
        self.stdout.write(f"Serving http://127.0.0.1:{options['port']}/ (Ctrl-C stops).")
        config = uvicorn.Config(
            # Static files from the finders whatever DEBUG says, unless WhiteNoise serves them.
            application(static=WHITENOISE not in settings.MIDDLEWARE),
            host="127.0.0.1",
            port=options["port"],
            loop="uvloop",
            http="httptools",
            ws="websockets-sansio",
            lifespan="off",
            log_level="warning",
            access_log=False,
        )
        self.server = uvicorn.Server(config)
        try:
            # The runner starts on the server's loop, so its first push already goes there.
            serve(self.server, started=runner.start)
        finally:
            runner.stop()

    def _simulated(self, options: dict[str, Any]) -> Runner:
        """Resume the simulated clock where the last run left it; the loop with demo traffic."""
        state, _ = ControlState.objects.get_or_create(pk=1)
        today = datetime.now(UTC).date()
        start = state.sim_now or datetime.combine(today, time(7, 30), tzinfo=UTC)
        sim = SimulatedClock(start, options["speed"])
        clock.set_clock(sim)
        seed_demo_service(now=sim.now())
        seed_demo_notebooks(now=sim.now())
        seed_demo_calendar(now=sim.now())

        def remember() -> None:
            ControlState.objects.filter(pk=1).update(sim_now=sim.now())

        extra: list[Callable[[], object]] = [remember]
        if not options["no_traffic"]:
            extra.append(DemoTraffic())
        self.stdout.write(
            f"Simulated clock at {start:%Y-%m-%d %H:%M} UTC, {options['speed']:g}× real time "
            f"(one day in {24 * 60 / options['speed']:.0f} minutes)."
        )
        return Runner(speed=options["speed"], extra=extra)
