"""Bring the node rows in line with the Kubernetes cluster's nodes, once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from console import clock
from jobs.backends.kubernetes import KubernetesBackend


class Command(BaseCommand):
    """`python manage.py kube_sync_nodes`: what the backend's observe also does every minute."""

    help = "Read the cluster's nodes (GPUs, CPU, memory, pool label) into the node rows."

    def handle(self, *args: Any, **options: Any) -> None:
        """Sync and say what changed."""
        result = KubernetesBackend.from_settings().sync_nodes(now=clock.now())
        for label, names in (
            ("Added", result.created),
            ("Updated", result.updated),
            ("Cordoned", result.cordoned),
        ):
            if names:
                self.stdout.write(f"{label}: {', '.join(names)}")
        for message in result.messages:
            self.stdout.write(message)
        if not (result.created or result.updated or result.cordoned or result.messages):
            self.stdout.write("Nodes already match the cluster.")
