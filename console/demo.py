"""The mission's scenario: 16 × 8 A100, Quota 1 with children 1.1 and 1.2, three teams."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import transaction

from cluster.models import Node, NodePool, ResourcePool
from cluster.services import node_create, node_pool_create, resource_pool_create
from jobs.choices import Kind
from jobs.models import Workload
from quotas.amounts import Amounts
from quotas.choices import CalendarAction
from quotas.models import CalendarRule, Quota
from quotas.services.quotas import quota_create
from workspaces.choices import Role
from workspaces.models import Workspace
from workspaces.services import (
    resource_usage_rule_set,
    workspace_create,
    workspace_member_add,
    workspace_quota_bind,
)

PASSWORDS = {
    "admin": "tidepool-admin",
    "alice": "tidepool-alice",
    "bob": "tidepool-bob",
    "carol": "tidepool-carol",
}
NODE_CPU = 128_000
NODE_MEMORY = 1_048_576
TEAMS = (
    ("alice", "workspace_a", "Quota 1"),
    ("bob", "workspace_b", "Quota 1.1"),
    ("carol", "workspace_c", "Quota 1.2"),
)


@dataclass(frozen=True)
class Demo:
    """Handles to what seed_demo built."""

    resource_pool: ResourcePool
    node_pool: NodePool
    quotas: dict[str, Quota]
    workspaces: dict[str, Workspace]


def _user(username: str, *, platform_admin: bool = False) -> object:
    """Create a demo user with its demo password, once."""
    users = get_user_model()
    user, created = users.objects.get_or_create(username=username)
    if created:
        user.set_password(PASSWORDS[username])
        user.email = f"{username}@tidepool.example"
        if platform_admin:
            user.is_staff = True
            user.is_superuser = True
        user.save()
        if platform_admin:
            user.user_permissions.add(Permission.objects.get(codename="manage_cluster"))
    return user


@transaction.atomic
def seed_demo() -> Demo:
    """Build the demo scenario; running it again changes nothing."""
    admin = _user("admin", platform_admin=True)
    pool = ResourcePool.objects.filter(name="general").first() or resource_pool_create(
        name="general", description="The shared GPU cluster."
    )
    node_pool = NodePool.objects.filter(name="A100-80G").first() or node_pool_create(
        resource_pool=pool, name="A100-80G", gpu_model="A100-80G"
    )
    for i in range(1, 17):
        name = f"a100-{i:02d}"
        if not Node.objects.filter(name=name).exists():
            node_create(node_pool=node_pool, name=name, gpus=8, cpu=NODE_CPU, memory=NODE_MEMORY)

    def quota(name: str, gpus: int, parent: Quota | None, child_preemption: bool) -> Quota:
        existing = Quota.objects.filter(name=name).first()
        if existing:
            return existing
        return quota_create(
            actor=admin,
            name=name,
            resource_pool=pool,
            parent=parent,
            resources={node_pool: Amounts(min_gpu=gpus * 1000)},
            child_preemption=child_preemption,
        )

    q1 = quota("Quota 1", 128, None, True)
    quotas = {
        "Quota 1": q1,
        "Quota 1.1": quota("Quota 1.1", 48, q1, False),
        "Quota 1.2": quota("Quota 1.2", 80, q1, False),
    }
    workspaces = {}
    for username, ws_name, quota_name in TEAMS:
        ws = Workspace.objects.filter(name=ws_name).first() or workspace_create(
            name=ws_name, description=f"{username}'s team"
        )
        workspace_quota_bind(workspace=ws, quota=quotas[quota_name])
        workspace_member_add(workspace=ws, user=_user(username), role=Role.DEVELOPER)  # type: ignore[arg-type]
        for role in (Role.ADMIN, Role.DEVELOPER):
            resource_usage_rule_set(workspace=ws, quota=quotas[quota_name], role=role)
        workspaces[ws_name] = ws
    return Demo(resource_pool=pool, node_pool=node_pool, quotas=quotas, workspaces=workspaces)


@transaction.atomic
def seed_demo_service(*, now: datetime) -> Workload:
    """Team A's inference service in Quota 1: 8 GPUs a replica, 8 by day and none by night."""
    from jobs.services.scaling import scaling_rule_create
    from jobs.services.workloads import Shape, service_create

    existing = Workload.objects.filter(name="chat-api", kind=Kind.INFERENCE).first()
    if existing:
        return existing
    demo = seed_demo()
    alice = get_user_model().objects.get(username="alice")
    service = service_create(
        actor=alice,
        workspace=demo.workspaces["workspace_a"],
        quota=demo.quotas["Quota 1"],
        name="chat-api",
        shape=Shape(replicas=1, gpu=8000, cpu=16000, memory=131072, priority=9),
        node_pools=[demo.node_pool],
        min_replicas=0,
        max_replicas=8,
        now=now,
    )
    for name, cron, target in (("day", "0 8 * * *", 8), ("night", "0 22 * * *", 0)):
        scaling_rule_create(
            service=service, name=name, cron=cron, timezone="UTC", target_replicas=target, now=now
        )
    return service


DEMO_NOTEBOOKS = ("notebook-eda", "notebook-sweep")


@transaction.atomic
def seed_demo_notebooks(*, now: datetime) -> list[Workload]:
    """Team C's two notebooks with a 30-minute idle auto-stop, one in use, one abandoned.

    The simulated cluster plays an even-pk instance as in use and an odd-pk one as abandoned
    (jobs.backends.simulated.last_activity): created one after the other, one of each.
    """
    from jobs.services.workloads import Shape, instance_start

    notebooks = Workload.objects.filter(name__in=DEMO_NOTEBOOKS, kind=Kind.INTERACTIVE)
    existing = list(notebooks.order_by("pk"))
    if existing:
        return existing
    demo = seed_demo()
    carol = get_user_model().objects.get(username="carol")
    return [
        instance_start(
            actor=carol,
            workspace=demo.workspaces["workspace_c"],
            quota=demo.quotas["Quota 1.2"],
            name=name,
            shape=Shape(replicas=1, gpu=1000, cpu=4000, memory=32768),
            node_pools=[demo.node_pool],
            max_duration=8 * 3600,
            idle_stop_minutes=30,
            now=now,
        )
        for name in DEMO_NOTEBOOKS
    ]


# Team B's nightly loan from team C: (name, cron, giver, taker). The return fires the morning
# after each weekday loan (Tuesday to Saturday), so it never gives back what was not lent.
NIGHTLY_LOAN = (
    ("Team B nightly loan", "0 22 * * 1-5", "Quota 1.2", "Quota 1.1"),
    ("Team B loan return", "0 8 * * 2-6", "Quota 1.1", "Quota 1.2"),
)
LOAN_GPUS = 32


@transaction.atomic
def seed_demo_calendar(*, now: datetime) -> list[CalendarRule]:
    """Every weekday at 22:00 UTC, 32 GPUs of team C's guarantee (Quota 1.2, 80) go to team
    B (Quota 1.1, 48); at 08:00 they come back."""
    from quotas.services.calendar import calendar_rule_create, next_firing

    demo = seed_demo()
    rules: list[CalendarRule] = []
    since = now
    for name, cron, giver, taker in NIGHTLY_LOAN:
        rule = CalendarRule.objects.filter(name=name).first() or calendar_rule_create(
            name=name,
            cron=cron,
            timezone="UTC",
            action=CalendarAction.REBALANCE,
            quota=demo.quotas[giver],
            target=demo.quotas[taker],
            node_pool=demo.node_pool,
            gpus=LOAN_GPUS,
            now=since,
        )
        rules.append(rule)
        # The return counts from the first loan: seeded between 22:00 and 08:00, it must not
        # give back the night's loan that was never made.
        since = next_firing(rule, now) or now
    return rules
