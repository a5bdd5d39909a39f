"""The job list, the job page, the timeline and the API never contradict each other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from jobs.choices import EventKind, Status
from jobs.models import Workload
from jobs.progress import percent, restarts_text
from jobs.scheduling.tree import count, gpus, short_name
from jobs.services.scaling import service_scale
from jobs.services.workloads import end_workload, workload_cancel
from jobs.views import row

pytestmark = pytest.mark.django_db

WS = "workspace_b"


def _page(login: Any, user: Any, name: str, *args: Any, **query: str) -> str:
    response = login(user).get(reverse(name, args=[WS, *args]), query)
    assert response.status_code == 200
    return response.content.decode()


def _api(user: Any) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def test_a_succeeded_job_shows_100_percent_whatever_progress_was_reported(
    bob: Any, submit: Callable[..., Workload], tick: Callable[..., None], clock: Any, login: Any
) -> None:
    """The Kubernetes backend reports no progress: a job that ends Succeeded is done."""
    job = submit(bob, "done", replicas=1, gpus=8, total_work=8 * 3600)
    tick()
    Workload.objects.filter(pk=job.pk).update(progress=0.4 * 8 * 3600)
    job.refresh_from_db()
    end_workload(
        job,
        status=Status.SUCCEEDED,
        reason="All replicas finished.",
        now=clock.now(),
        event_kind=EventKind.FINISHED,
    )
    job.refresh_from_db()
    assert job.progress == job.total_work
    assert row(job, clock.now()).progress == 100
    # even a row stored before this fix, with its last report, shows 100%
    Workload.objects.filter(pk=job.pk).update(progress=0.4 * 8 * 3600)
    assert 'title="100%"' in _page(login, bob, "jobs:job_list")
    assert "100%" in _page(login, bob, "jobs:job_detail", job.pk)
    assert percent(0.4, 1.0, Status.SUCCEEDED) == 100
    assert percent(0.999, 1.0, Status.RUNNING) == 99


def test_progress_after_a_resume_is_the_checkpoint_it_resumed_from(
    bob: Any, submit: Callable[..., Workload], service: Any, tick: Callable[..., None], clock: Any
) -> None:
    own = submit(bob, "own", replicas=6, total_work=48 * 8 * 3600)
    tick(1)
    borrowed = submit(
        bob,
        "borrowed",
        replicas=5,
        idle_policy="acceptable",
        checkpoint_interval=1000,
        total_work=40 * 4 * 3600,
    )
    tick(1)
    tick(30)
    tick(1500)  # a checkpoint at 1000 s: 40 GPUs × 1000 s of 576,000 GPU-s is 6.94%
    service_scale(service=service, replicas=8, now=clock.now(), reason="day")
    tick()
    borrowed.refresh_from_db()
    assert borrowed.status == Status.REQUEUED
    assert borrowed.progress == borrowed.checkpoint_progress
    service_scale(service=service, replicas=1, now=clock.now(), reason="night")
    tick()
    borrowed.refresh_from_db()
    assert borrowed.status == Status.RUNNING and own.pk
    resumed = borrowed.events.get(kind=EventKind.RESUMED)
    shown = row(borrowed, clock.now()).progress
    assert resumed.data["progress"] == borrowed.progress == borrowed.checkpoint_progress
    assert shown == 6  # rounded down, as the list shows it (not 7)
    assert f"at {shown}% progress" in resumed.message


@pytest.mark.parametrize(
    ("restarts", "failures", "text"),
    [
        (0, 0, "not restarted"),
        (1, 1, "restarted once: 1 fault of 3 allowed"),
        (1, 0, "restarted once: 1 preemption"),
        (4, 1, "restarted 4 times: 1 fault of 3 allowed, 3 preemptions"),
        (2, 2, "restarted 2 times: 2 faults of 3 allowed"),
    ],
    ids=["never", "one-fault", "one-preemption", "mixed", "faults-only"],
)
def test_restarts_separate_preemptions_from_faults(restarts: int, failures: int, text: str) -> None:
    assert restarts_text(restarts, failures, 3) == text


def test_the_job_page_and_list_say_which_restarts_were_faults(
    bob: Any, submit: Callable[..., Workload], login: Any
) -> None:
    job = submit(bob, "flaky", replicas=1, gpus=8)
    Workload.objects.filter(pk=job.pk).update(restarts=4, failures=1)
    detail = _page(login, bob, "jobs:job_detail", job.pk)
    assert "restarted 4 times: 1 fault of 3 allowed, 3 preemptions" in detail
    listing = _page(login, bob, "jobs:job_list")
    assert 'title="Restarted 4 times: 1 fault of 3 allowed, 3 preemptions"' in listing


def test_a_finished_job_shows_no_in_quota_badge(
    bob: Any, submit: Callable[..., Workload], tick: Callable[..., None], login: Any, clock: Any
) -> None:
    job = submit(bob, "short", replicas=1, gpus=8)
    tick()
    job.refresh_from_db()
    assert job.in_quota is True
    assert ">In Quota</span>" in _page(login, bob, "jobs:job_detail", job.pk)
    workload_cancel(actor=bob, workload=job, now=clock.now())
    job.refresh_from_db()
    assert job.status == Status.CANCELLED and job.in_quota is None
    assert ">In Quota</span>" not in _page(login, bob, "jobs:job_detail", job.pk)
    assert ">In Quota</span>" not in _page(login, bob, "jobs:job_list")
    assert _api(bob).get(f"/api/v1/jobs/{job.pk}/").json()["in_quota"] is None
    # a row that ended before this fix kept its label: the pages still show none
    Workload.objects.filter(pk=job.pk).update(in_quota=True)
    assert ">In Quota</span>" not in _page(login, bob, "jobs:job_list")


def test_the_list_calls_the_label_quota_status_and_idle_resources_the_policy(
    bob: Any, submit: Callable[..., Workload], login: Any
) -> None:
    job = submit(bob, "named", replicas=1, gpus=8, idle_policy="acceptable")
    listing = _page(login, bob, "jobs:job_list")
    assert ">Quota status</a>" in listing and "Quota status <select" in listing
    assert "Idle Resources" not in listing
    detail = _page(login, bob, "jobs:job_detail", job.pk)
    assert "<dt>Idle Resources</dt><dd>Acceptable</dd>" in detail


def test_sentences_count_in_singular_and_plural() -> None:
    assert (gpus(1000), gpus(500), gpus(8000)) == ("1 GPU", "0.5 GPUs", "8 GPUs")
    assert (count(1, "job"), count(2, "job")) == ("1 job", "2 jobs")
    assert short_name("workspace_b/x") == "x" and short_name("x") == "x"


def test_a_pending_reason_names_no_workspace_and_counts_its_gpus(
    bob: Any, submit: Callable[..., Workload], tick: Callable[..., None]
) -> None:
    submit(bob, "fills", replicas=16, gpus=8, idle_policy="acceptable")
    tick()
    waiting = submit(bob, "borrower", replicas=1, gpus=1, idle_policy="idle_only")
    tick()
    waiting.refresh_from_db()
    assert waiting.status == Status.QUEUED
    assert waiting.pending_reason.startswith(
        "the job runs on idle capacity only (Only Idle Resources), and only 0 idle GPUs can be "
        "borrowed there (it needs 1 GPU)"
    ), waiting.pending_reason
    assert "workspace_b" not in waiting.pending_reason
