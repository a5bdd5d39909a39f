"""The bridge is the one place that imports both the ORM and the pure core (DESIGN §2)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jobs.bridge.plan import cycle_plan
from jobs.bridge.snapshot import active_workloads
from jobs.choices import EventKind, Status

REPO = Path(__file__).resolve().parents[2]
APPS = ("console", "quotas", "workspaces", "jobs")
EXEMPT = ("jobs/bridge/", "jobs/scheduling/")


def _imported(path: Path) -> set[str]:
    """Every module (and `module.name`) a file imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def _imports_both(path: Path) -> bool:
    names = _imported(path)
    core = any(n == "jobs.scheduling" or n.startswith("jobs.scheduling.") for n in names)
    orm = any(n.startswith("django.db") or n.endswith(".models") for n in names)
    return core and orm


def test_only_the_bridge_imports_both_the_core_and_the_orm() -> None:
    both = [
        path.relative_to(REPO).as_posix()
        for app in APPS
        for path in sorted((REPO / app).rglob("*.py"))
        if not path.relative_to(REPO).as_posix().startswith(EXEMPT) and _imports_both(path)
    ]
    assert both == []


@pytest.mark.django_db
def test_the_snapshot_hands_records_not_attributes_hung_on_rows(bob, submit, tick, demo) -> None:
    job = submit(bob, "resnet", replicas=2, gpus=8)
    tick()
    (info,) = [i for i in active_workloads() if i.workload.pk == job.pk]
    assert info.pool_names == (demo.node_pool.name,)
    assert sorted(p.index for p in info.live_pods) == [0, 1]
    assert not hasattr(info.workload, "live_pods") and not hasattr(info.workload, "pool_names")


@pytest.mark.django_db
def test_planning_writes_nothing_and_names_each_change(bob, submit, tick, clock) -> None:
    first = submit(bob, "first", replicas=1, gpus=8)
    tick()
    more = submit(bob, "more", replicas=2, gpus=8)
    plan = cycle_plan(clock.now())
    more.refresh_from_db()
    assert more.status == Status.QUEUED and not more.pods.exists()
    assert plan.admitted == 1 and plan.evictions == () and plan.relabels == ()
    (start,) = plan.starts
    assert start.workload.pk == more.pk and start.values["status"] == Status.RUNNING
    assert [(p.index, p.pk) for p in start.pods] == [(0, None), (1, None)]
    assert [n.kind for n in start.notes] == [EventKind.ADMITTED, EventKind.PLACED]
    assert first.pods.count() == 1
