"""Record demo history to replay: `manage.py record_demo_history --days 7`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from whatif.history import demo_history_record


class Command(BaseCommand):
    """Seed the demo and play it tick by tick on a manual clock, as the control loop would."""

    help = "Play the demo cluster for --days simulated days (fast), recording its history."

    def add_arguments(self, parser: CommandParser) -> None:
        """--days, --start (ISO, UTC; default: that many days before now)."""
        parser.add_argument("--days", type=float, default=7.0)
        parser.add_argument("--start", type=datetime.fromisoformat, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        """Record, then say which window to replay."""
        from datetime import timedelta

        days = options["days"]
        start = options["start"] or datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(
            days=days
        )
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        end = demo_history_record(start=start, hours=days * 24)
        self.stdout.write(f"Recorded {start.isoformat()} to {end.isoformat()}.")
