"""Seed the demo scenario (idempotent) and print the logins."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from console.demo import PASSWORDS, seed_demo


class Command(BaseCommand):
    """`python manage.py seed_demo`."""

    help = "Build the mission's demo scenario; safe to run again."

    def handle(self, *args: Any, **options: Any) -> None:
        """Seed, then print who can log in."""
        demo = seed_demo()
        self.stdout.write(
            f"Seeded resource pool {demo.resource_pool.name}: "
            f"{demo.node_pool.nodes.count()} nodes in {demo.node_pool.name}; "
            f"quotas {', '.join(demo.quotas)}; workspaces {', '.join(demo.workspaces)}."
        )
        self.stdout.write("Demo logins (username / password):")
        for username, password in PASSWORDS.items():
            self.stdout.write(f"  {username} / {password}")
