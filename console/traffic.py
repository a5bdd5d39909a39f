"""The demo's workload generator: teams B and C submit training all day, C opens notebooks.

Deterministic for a seed and a clock, so the day/night benchmark replays the same demand.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model

from cluster.models import NodePool
from console import clock
from jobs.choices import ACTIVE_STATUSES, IdlePolicy, Kind
from jobs.models import Workload
from jobs.services.workloads import Shape, instance_start, job_submit
from workspaces.models import Workspace

# team → (user, workspace, active training jobs to keep, share of idle policies)
TEAMS = {
    "b": ("bob", "workspace_b", 10),
    "c": ("carol", "workspace_c", 12),
}
MODELS = ("resnet50", "bert-large", "llama-7b-sft", "vit-b16", "whisper-small", "t5-base")
POLICIES = (IdlePolicy.ACCEPTABLE, IdlePolicy.ACCEPTABLE, IdlePolicy.IDLE_ONLY, IdlePolicy.NONE)


@dataclass
class DemoTraffic:
    """Top up each team's queue every `every` simulated seconds."""

    seed: int = 7
    every: float = 600.0
    static: bool = False  # static partitioning: nobody borrows
    rng: random.Random = field(init=False)
    last: datetime | None = None
    submitted: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def __call__(self) -> int:
        """Submit what the teams would have submitted by now; returns how many."""
        now = clock.now()
        if self.last is not None and now - self.last < timedelta(seconds=self.every):
            return 0
        self.last = now
        pool = NodePool.objects.order_by("pk").first()
        if pool is None:
            return 0
        users = get_user_model().objects.in_bulk(
            [u for u, _, _ in TEAMS.values()], field_name="username"
        )
        made = 0
        for team, (username, ws_name, keep) in TEAMS.items():
            ws = Workspace.objects.get(name=ws_name)
            quota = ws.quotas.get()
            active = Workload.objects.filter(
                workspace=ws, kind=Kind.TRAINING, status__in=ACTIVE_STATUSES
            ).count()
            for _ in range(max(keep - active, 0)):
                self.submitted += 1
                replicas = self.rng.choice((1, 1, 2))
                gpus = self.rng.choice((4, 8, 8))
                hours = self.rng.uniform(1.0, 5.0)
                job_submit(
                    actor=users[username],
                    workspace=ws,
                    quota=quota,
                    name=f"{self.rng.choice(MODELS)}-{_next_number(ws):04d}",
                    shape=Shape(
                        replicas=replicas,
                        gpu=gpus * 1000,
                        cpu=8000 * gpus // 8,
                        memory=65536 * gpus // 8,
                        priority=self.rng.choice((3, 5, 5, 7)),
                    ),
                    node_pools=[pool],
                    idle_policy=IdlePolicy.NONE if self.static else self.rng.choice(POLICIES),
                    checkpoint_interval=1800,
                    total_work=replicas * gpus * hours * 3600,
                    now=now,
                )
                made += 1
            if team == "c" and self.rng.random() < 0.08:
                self.submitted += 1
                instance_start(
                    actor=users[username],
                    workspace=ws,
                    quota=quota,
                    name=f"notebook-{_next_number(ws):04d}",
                    shape=Shape(replicas=1, gpu=1000, cpu=4000, memory=32768),
                    node_pools=[pool],
                    max_duration=2 * 3600,
                    now=now,
                )
                made += 1
        return made


def _next_number(workspace: Workspace) -> int:
    """A running number for names: workloads are never deleted, so count + 1 is unused."""
    return Workload.objects.filter(workspace=workspace).count() + 1
