"""Scale and Rebalance preview the running jobs a lower min would make Not in Quota."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from console.demo import Demo
from jobs.models import Workload
from quotas.models import QuotaAudit
from tests.jobs import conftest as control
from tests.quotas.builders import dump, min_gpus

pytestmark = pytest.mark.django_db

clock, sim, tick, submit = control.clock, control.sim, control.tick, control.submit


@pytest.fixture
def bob_48(bob: Any, submit: Callable[..., Workload], tick: Callable[..., None]) -> list[Workload]:
    """Bob runs 48 GPUs In Quota in Quota 1.1: "first" (24 GPUs), then "second" (24 GPUs)."""
    first = submit(bob, "first", replicas=3)
    tick(1)
    second = submit(bob, "second", replicas=3)
    tick(30)
    jobs = list(Workload.objects.filter(pk__in=[first.pk, second.pk]).order_by("submitted_at"))
    assert [(w.status, w.in_quota) for w in jobs] == [("Running", True)] * 2
    return jobs


def _gpu_field(demo: Demo) -> str:
    return f"np{demo.node_pool.pk}_min_gpu"


def _scale(client: Any, demo: Demo, gpus: str, **extra: str) -> Any:
    q11 = demo.quotas["Quota 1.1"]
    return client.post(
        f"/quotas/{q11.pk}/scale/", {_gpu_field(demo): gpus, "version": "1", **extra}
    )


def test_lowering_quota_1_1_to_24_previews_the_newest_job_and_changes_nothing(
    demo: Demo, admin, login, bob_48
) -> None:
    before = dump()
    response = _scale(login(admin), demo, "24")
    assert response.status_code == 200
    assert [t.name for t in response.templates][0] == "quotas/preview.html"
    assert [w.name for w in response.context["preview"].not_in_quota] == ["second"]
    html = response.content.decode()
    assert "This running job would become <strong>Not in Quota</strong>" in html
    assert 'data-name="second"' in html and 'data-name="first"' not in html
    assert f'href="/workspaces/workspace_b/jobs/{bob_48[1].pk}/"' in html
    assert "A100-80G GPU min 48 → 24" in html
    assert ">Confirm scale</button>" in html and ">Back</button>" in html
    assert "1 running job (24 GPUs) becomes Not in Quota" in html
    # The typed amounts ride along as hidden fields for Confirm.
    assert f'type="hidden" name="{_gpu_field(demo)}" value="24"' in html
    assert dump() == before


def test_lowering_to_0_lists_both_running_jobs(demo: Demo, admin, login, bob_48) -> None:
    response = _scale(login(admin), demo, "0")
    assert {w.name for w in response.context["preview"].not_in_quota} == {"first", "second"}
    assert "These 2 running jobs would become" in response.content.decode()


def test_confirming_the_preview_scales_and_says_what_it_did(
    demo: Demo, admin, login, bob_48
) -> None:
    client = login(admin)
    response = _scale(client, demo, "24", confirm="1", affected="1")
    assert response.status_code == 302 and response["Location"] == "/quotas/"
    assert min_gpus("Quota 1.1") == 24
    assert QuotaAudit.objects.filter(quota__name="Quota 1.1", action="scale").count() == 1
    page = client.get("/quotas/").content.decode()
    assert "Scaled quota Quota 1.1. 1 running job becomes Not in Quota (preemptible)." in page


def test_back_returns_to_the_form_with_what_was_typed(demo: Demo, admin, login, bob_48) -> None:
    before = dump()
    response = _scale(login(admin), demo, "24", back="1")
    assert [t.name for t in response.templates][0] == "quotas/form.html"
    assert response.context["form"][_gpu_field(demo)].value() == "24"
    assert dump() == before


def test_the_next_cycle_takes_the_label_from_the_previewed_job(
    demo: Demo, admin, login, bob_48, tick
) -> None:
    _scale(login(admin), demo, "24", confirm="1")
    tick()
    labels = {w.name: w.in_quota for w in Workload.objects.filter(name__in=["first", "second"])}
    assert labels == {"first": True, "second": False}


def test_raising_a_quota_skips_the_preview_and_says_no_job_is_affected(
    demo: Demo, admin, login, bob_48
) -> None:
    from quotas.services.quotas import quota_scale
    from tests.quotas.builders import gpus

    quota_scale(actor=admin, quota=demo.quotas["Quota 1.2"], resources={demo.node_pool: gpus(72)})
    client = login(admin)
    response = _scale(client, demo, "56")
    assert response.status_code == 302
    assert min_gpus("Quota 1.1") == 56
    assert (
        "Scaled quota Quota 1.1. No running job is affected."
        in client.get("/quotas/").content.decode()
    )


def test_lowering_without_touching_a_running_job_still_asks_first(
    demo: Demo, admin, login, bob_48
) -> None:
    client = login(admin)
    before = dump()
    limit = {f"np{demo.node_pool.pk}_max_gpu": "64"}
    response = _scale(client, demo, "48", **limit)
    assert response.status_code == 200
    assert response.context["preview"].not_in_quota == []
    html = response.content.decode()
    assert "Quota 1.1: A100-80G GPU max ∞ → 64." in html
    assert "No running job is affected" in html
    assert dump() == before
    response = _scale(client, demo, "48", confirm="1", **limit)
    assert response.status_code == 302
    assert "No running job is affected." in client.get("/quotas/").content.decode()


def test_a_refused_scale_shows_the_service_message_before_any_preview(
    demo: Demo, admin, login, bob_48
) -> None:
    before = dump()
    response = _scale(login(admin), demo, "56")
    assert [t.name for t in response.templates][0] == "quotas/form.html"
    assert response.context["form"].errors[_gpu_field(demo)] == [
        "Quota 1 has 128 GPUs on A100-80G and its children would need 136 GPUs "
        "(Quota 1.1 56 GPUs + Quota 1.2 80 GPUs). At most 48 GPUs fit for Quota 1.1."
    ]
    assert dump() == before


def test_a_stale_confirm_is_refused_for_the_whole_form(demo: Demo, admin, login, bob_48) -> None:
    from quotas.services.quotas import quota_scale
    from tests.quotas.builders import gpus

    client = login(admin)
    assert _scale(client, demo, "24").status_code == 200  # the preview
    quota_scale(actor=admin, quota=demo.quotas["Quota 1.1"], resources={demo.node_pool: gpus(40)})
    response = _scale(client, demo, "24", confirm="1")
    assert response.context["form"].non_field_errors() == [
        "Quota 1.1 is at version 2, not 1: it changed since you loaded it."
    ]
    assert min_gpus("Quota 1.1") == 40


# --- Rebalance ---------------------------------------------------------------------------------


def _rebalance(client: Any, demo: Demo, gpus: str, **extra: str) -> Any:
    q11, q12 = demo.quotas["Quota 1.1"], demo.quotas["Quota 1.2"]
    return client.post(
        f"/quotas/{q11.pk}/rebalance/",
        {"target": q12.pk, "node_pool": demo.node_pool.pk, "gpu": gpus, **extra},
    )


def test_rebalance_that_lowers_bobs_quota_previews_his_newest_job(
    demo: Demo, admin, login, bob_48
) -> None:
    before = dump()
    response = _rebalance(login(admin), demo, "24")
    assert [w.name for w in response.context["preview"].not_in_quota] == ["second"]
    html = response.content.decode()
    assert "24 GPUs guaranteed on A100-80G from Quota 1.1 to Quota 1.2" in html
    assert dump() == before


def test_confirmed_rebalance_moves_the_amounts(demo: Demo, admin, login, bob_48) -> None:
    client = login(admin)
    response = _rebalance(client, demo, "24", confirm="1", affected="1")
    assert response.status_code == 302
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (24, 104)
    assert "1 running job becomes Not in Quota" in client.get("/quotas/").content.decode()


def test_rebalance_refused_before_the_preview(demo: Demo, admin, login, bob_48) -> None:
    response = _rebalance(login(admin), demo, "49")
    assert response.context["form"].errors["gpu"] == [
        "Quota 1.1 guarantees 48 GPUs on A100-80G; it cannot give 49 GPUs."
    ]


def test_rebalance_into_bobs_quota_asks_first_though_no_job_is_touched(
    demo: Demo, admin, login, bob_48
) -> None:
    q11, q12 = demo.quotas["Quota 1.1"], demo.quotas["Quota 1.2"]
    data = {"target": q11.pk, "node_pool": demo.node_pool.pk, "gpu": "8"}
    client = login(admin)
    response = client.post(f"/quotas/{q12.pk}/rebalance/", data)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Quota 1.2 A100-80G GPU min 80 → 72" in html
    assert "Quota 1.1 A100-80G GPU min 48 → 56" in html
    assert "No running job is affected" in html
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (48, 80)
    response = client.post(f"/quotas/{q12.pk}/rebalance/", {**data, "confirm": "1"})
    assert response.status_code == 302
    assert (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")) == (56, 72)


# --- the shared preview behind the page and the API --------------------------------------------


def test_the_api_preview_and_the_page_agree(demo: Demo, admin, login, bob_48) -> None:
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(admin)
    body = api.post(
        f"/api/v1/quotas/{demo.quotas['Quota 1.1'].pk}/scale/preview/",
        {"resources": [{"node_pool": "A100-80G", "min": {"gpu": 24}}]},
        format="json",
    ).json()
    assert [w["name"] for w in body["not_in_quota"]] == ["second"]
    assert body["in_quota"] == []
    page = _scale(login(admin), demo, "24")
    assert [w.name for w in page.context["preview"].not_in_quota] == ["second"]
