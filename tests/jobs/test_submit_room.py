"""The submit form shows each usable quota's room now, and its errors in plain words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

WS = "workspace_b"


def _room(response: Any) -> list[tuple[str, str, str, str, str]]:
    return [
        (quota.name, pool, free, idle, left)
        for quota, rooms in response.context["room"]
        for pool, free, idle, left in rooms
    ]


def test_the_submit_form_shows_what_is_free_in_quota_and_idle_to_borrow(
    demo: Any, login: Any, bob: Any, submit: Callable[..., Any], tick: Callable[..., None]
) -> None:
    url = reverse("jobs:job_submit", args=[WS])
    before = login(bob).get(url)
    assert _room(before) == [("Quota 1.1", "A100-80G", "48 GPUs", "128 GPUs", "no max")]
    submit(bob, "runs", replicas=2, gpus=8)
    tick()
    after = login(bob).get(url)
    assert _room(after) == [("Quota 1.1", "A100-80G", "32 GPUs", "112 GPUs", "no max")]
    page = after.content.decode()
    assert 'data-testid="room"' in page and "32 GPUs" in page and "Idle to borrow" in page


def test_the_submit_form_says_its_errors_in_plain_words(demo: Any, login: Any, bob: Any) -> None:
    url = reverse("jobs:job_submit", args=[WS])
    data = {
        "name": "Bad Name",
        "replicas": "two",
        "gpu": "0.0005",
        "priority": "12",
        "idle_policy": "sometimes",
        "checkpoint_minutes": "0",
    }
    errors = login(bob).post(url, data).context["form"].errors
    assert errors["replicas"] == ["Replicas must be a whole number, like 1."]
    assert errors["gpu"] == ["GPUs per replica takes at most 3 decimal places (like 0.125)."]
    assert errors["priority"] == ["Priority must be at most 9."]
    assert errors["checkpoint_minutes"] == ["Checkpoint interval (minutes) must be at least 1."]
    assert errors["node_pool"] == ["Choose a node pool."]
    assert errors["cpu"] == ["CPU cores per replica is required."]
    assert errors["idle_policy"] == [
        "Idle Resources: choose one of None, Acceptable, Only Idle Resources."
    ]
    assert "lower-case letters, digits and -" in errors["name"][0]
    words = " ".join(e for field in errors.values() for e in field)
    for jargon in ("This field", "Ensure this value", "Select a valid choice", "slug", "Enter a"):
        assert jargon not in words
