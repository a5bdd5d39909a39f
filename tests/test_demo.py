"""seed_demo builds the mission's scenario and is idempotent."""

from __future__ import annotations

from cluster.models import Node
from console.demo import seed_demo
from quotas.models import Quota, QuotaAudit
from workspaces.models import Membership


def test_seed_demo_builds_the_mission_cluster(demo) -> None:
    assert Node.objects.count() == 16
    assert sum(Node.objects.values_list("gpus", flat=True)) == 128
    q1 = Quota.objects.get(name="Quota 1")
    assert q1.child_preemption
    mins = {q.name: q.resources.get().min_gpu for q in Quota.objects.all()}
    assert mins == {"Quota 1": 128_000, "Quota 1.1": 48_000, "Quota 1.2": 80_000}
    assert {(m.user.username, m.workspace.name) for m in Membership.objects.all()} == {
        ("alice", "workspace_a"),
        ("bob", "workspace_b"),
        ("carol", "workspace_c"),
    }


def test_seed_demo_twice_changes_nothing(demo) -> None:
    audits = QuotaAudit.objects.count()
    seed_demo()
    assert Node.objects.count() == 16
    assert Quota.objects.count() == 3
    assert QuotaAudit.objects.count() == audits
