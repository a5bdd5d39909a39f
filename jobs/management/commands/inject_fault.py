"""Inject a fault into the simulated cluster: a node goes down, a pod crashes, a job hangs."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.backends.simulated import SimulatedBackend
from jobs.choices import LIVE_POD_STATUSES
from jobs.models import Pod, Workload


class Command(BaseCommand):
    """`python manage.py inject_fault node-down a100-03` (or pod-crash JOB, hang JOB)."""

    help = "Inject a fault; the control loop notices it at its next backend sync."

    def add_arguments(self, parser: CommandParser) -> None:
        """The fault and its target."""
        parser.add_argument("fault", choices=["node-down", "pod-crash", "hang"])
        parser.add_argument("target", help="a node name, or a workload as workspace/name")
        parser.add_argument("--exit-code", type=int, default=137)
        parser.add_argument(
            "--message", default="", help="pod-crash: the container's termination message"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Mark the fault where the simulated backend will report it."""
        sim = SimulatedBackend()
        target = options["target"]
        if options["fault"] == "node-down":
            lost = sim.inject_node_down(target)
            self.stdout.write(f"Node {target} is down; {lost} pod(s) on it are lost.")
            return
        workspace, _, name = target.partition("/")
        workload = Workload.objects.filter(workspace__name=workspace, name=name).first()
        if workload is None:
            raise CommandError(f"No workload {name!r} in workspace {workspace!r}.")
        if options["fault"] == "hang":
            sim.inject_hang(workload)
            self.stdout.write(f"{target} hangs: it makes no more progress.")
            return
        pod = Pod.objects.filter(workload=workload, status__in=LIVE_POD_STATUSES).first()
        if pod is None:
            raise CommandError(f"{target} has no live pod to crash.")
        sim.inject_pod_crash(pod, exit_code=options["exit_code"], message=options["message"])
        said = f": {options['message']}" if options["message"] else ""
        self.stdout.write(
            f"Pod {pod.index} of {target} crashes with exit code {options['exit_code']}{said}."
        )
