"""Platform admins only: pages answer 404 to members (login for anonymous), the API 403 to a
member's POST and 404 to their GET of a replay, the CLI the API's refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console import clock
from whatif.choices import RunStatus
from whatif.models import WhatIf
from whatif.services import whatif_create, whatif_run

CHANGES = [{"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 1.1", "gpus": 8}]


@pytest.fixture
def no_dispatch(settings: Any) -> None:
    """Queue replays on the in-memory broker, where no worker takes them: the test runs them."""
    settings.CELERY_TASK_ALWAYS_EAGER = False


@pytest.fixture
def run(admin: Any, django_capture_on_commit_callbacks: Any) -> WhatIf:
    """A finished replay of the (empty) last 24 hours."""
    with django_capture_on_commit_callbacks(execute=False):
        asked = whatif_create(actor=admin, window="24h", changes=CHANGES, now=clock.now())
    done = whatif_run(whatif_id=asked.pk)
    assert done is not None and done.status == RunStatus.DONE
    return done


def _pages(run: WhatIf) -> list[str]:
    new = reverse("whatif:new") + "?window=7d&changes=" + json.dumps(CHANGES)
    compare = reverse("whatif:compare") + f"?a={run.pk}&b={run.pk}"
    return [reverse("whatif:list"), new, reverse("whatif:detail", args=[run.pk]), compare]


@pytest.mark.django_db
def test_admin_opens_every_what_if_page(login: Any, admin: Any, run: WhatIf) -> None:
    client = login(admin)
    for url in _pages(run):
        assert client.get(url).status_code == 200, url
    page = client.get(_pages(run)[1]).content.decode()
    assert "Move 8 GPUs of guarantee from Quota 1.2 to Quota 1.1" in page  # prefilled


@pytest.mark.django_db
@pytest.mark.parametrize("member", ["alice", "bob", "carol"])
def test_members_get_404_on_every_what_if_page(
    login: Any, member: str, run: WhatIf, request: Any
) -> None:
    client = login(request.getfixturevalue(member))
    for url in _pages(run):
        assert client.get(url).status_code == 404, url
    assert (
        client.post(
            reverse("whatif:new"), {"window": "24h", "changes": json.dumps(CHANGES)}
        ).status_code
        == 404
    )
    assert not WhatIf.objects.exclude(pk=run.pk).exists()


@pytest.mark.django_db
def test_anonymous_is_sent_to_login(login: Any, run: WhatIf) -> None:
    client = login(None)
    for url in _pages(run):
        answer = client.get(url)
        assert answer.status_code == 302 and reverse("login") in answer["Location"], url


@pytest.mark.django_db
def test_admin_posts_a_what_if_and_polls_it(
    admin: Any, no_dispatch: None, django_capture_on_commit_callbacks: Any
) -> None:
    api = APIClient()
    api.force_authenticate(admin)
    with django_capture_on_commit_callbacks(execute=True):
        answer = api.post("/api/v1/what-if/", {"window": "24h", "changes": CHANGES}, format="json")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["status"] == "queued" and body["changes"][0]["to"] == "Quota 1.1"
    whatif_run(whatif_id=body["id"])
    polled = api.get(f"/api/v1/what-if/{body['id']}/").json()
    assert polled["status"] == "done" and polled["progress"] == 1.0
    assert set(polled["result"]["quotas"]) == {"Quota 1", "Quota 1.1", "Quota 1.2"}
    listed = api.get("/api/v1/what-if/").json()["results"]
    assert [r["id"] for r in listed] == [body["id"]] and "result" not in listed[0]


@pytest.mark.django_db
def test_a_bad_change_answers_400_on_changes_naming_the_field(admin: Any) -> None:
    api = APIClient()
    api.force_authenticate(admin)
    bad = [{"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 9", "gpus": 8}]
    answer = api.post("/api/v1/what-if/", {"window": "24h", "changes": bad}, format="json")
    assert answer.status_code == 400
    assert "changes[0].to" in answer.json()["changes"][0]
    too_much = [{"kind": "scale", "quota": "Quota 1.1", "gpus": 200}]
    answer = api.post("/api/v1/what-if/", {"window": "24h", "changes": too_much}, format="json")
    assert answer.status_code == 400 and "the changes together" in answer.json()["changes"][0]
    assert not WhatIf.objects.exists()


@pytest.mark.django_db
def test_members_cannot_post_or_see_what_ifs_in_the_api(alice: Any, run: WhatIf) -> None:
    api = APIClient()
    api.force_authenticate(alice)
    answer = api.post("/api/v1/what-if/", {"window": "24h", "changes": CHANGES}, format="json")
    assert answer.status_code == 403
    assert api.get(f"/api/v1/what-if/{run.pk}/").status_code == 404
    assert api.get("/api/v1/what-if/").json()["results"] == []
    anonymous = APIClient()
    assert anonymous.get(f"/api/v1/what-if/{run.pk}/").status_code in (401, 403)
    assert WhatIf.objects.count() == 1


@pytest.mark.django_db
def test_the_list_page_and_api_list_make_a_constant_number_of_queries(
    admin: Any, login: Any, django_assert_max_num_queries: Any
) -> None:
    for _ in range(6):
        WhatIf.objects.create(
            created_by=admin,
            created_at=clock.now(),
            window_start=clock.now(),
            window_end=clock.now(),
            changes=CHANGES,
        )
    client = login(admin)
    api = APIClient()
    api.force_authenticate(admin)
    with django_assert_max_num_queries(8):
        assert client.get(reverse("whatif:list")).status_code == 200
    with django_assert_max_num_queries(8):
        assert len(api.get("/api/v1/what-if/").json()["results"]) == 6
