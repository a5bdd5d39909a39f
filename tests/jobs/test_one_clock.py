"""One clock: the audit log, job timelines, pages and the API tell the same cluster time."""

from __future__ import annotations

from typing import Any

from jobs.models import WorkloadEvent
from quotas.models import QuotaAudit
from quotas.services.quotas import quota_set_child_preemption
from tests.jobs.conftest import START

ISO = "2026-12-01T06:00:00+00:00"  # START, which is not the wall clock's time


def test_audit_entry_and_job_event_at_one_cluster_moment_show_the_same_time(
    demo: Any, admin: Any, bob: Any, clock: Any, submit: Any, login: Any
) -> None:
    job = submit(bob, "same-moment", gpus=1)
    quota = demo.quotas["Quota 1.1"]
    quota_set_child_preemption(actor=admin, quota=quota, enabled=True)

    audit = QuotaAudit.objects.filter(quota=quota).latest("id")
    event = WorkloadEvent.objects.filter(workload=job).earliest("id")
    assert audit.at == event.at == START

    client = login(admin)
    overview = client.get(f"/quotas/{quota.pk}/").content.decode()
    assert f'<time datetime="{ISO}" data-when="full">2026-12-01 06:00:00 UTC</time>' in overview
    timeline = login(bob).get(f"/workspaces/workspace_b/jobs/{job.pk}/").content.decode()
    assert f'<time datetime="{ISO}" data-when="short">Dec 1 06:00:00 UTC</time>' in timeline

    results = login(admin).get(f"/api/v1/quotas/{quota.pk}/audit/").json()["results"]
    toggle = next(r for r in results if r["action"] == "toggle")
    assert toggle["at"].replace("Z", "+00:00") == ISO


def test_a_picked_zone_renders_times_in_it_with_its_name(
    demo: Any, admin: Any, clock: Any, login: Any
) -> None:
    quota = demo.quotas["Quota 1.1"]
    quota_set_child_preemption(actor=admin, quota=quota, enabled=True)
    client = login(admin)
    client.cookies["tp_tz"] = "Asia/Tokyo"
    page = client.get(f"/quotas/{quota.pk}/").content.decode()
    assert f'<time datetime="{ISO}" data-when="full">2026-12-01 15:00:00 JST</time>' in page
    assert '<option value="Asia/Tokyo" selected>' in page
    client.cookies["tp_tz"] = "Not/AZone<script>"
    page = client.get(f"/quotas/{quota.pk}/").content.decode()
    assert "2026-12-01 06:00:00 UTC" in page and "AZone" not in page
