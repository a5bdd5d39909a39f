"""Each action that ends work or cuts a guarantee: the first click changes nothing, Confirm does.

The first click is the one a user makes on the page that offers the action (the button posts to
its URL, so any page with such a button gets the step). The test reads the database before the
click, after it (unchanged, with the confirmation and its numbers on the screen) and after the
confirmation (applied). One server for the module; one browser context per case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import reverse

from jobs.models import ScalingRule, Workload
from jobs.services.cycle import scheduling_cycle_run
from jobs.services.scaling import scaling_rule_create, service_scale
from jobs.services.sync import backend_sync
from jobs.services.workloads import Shape, instance_start, service_create
from tests.browser.server import off_thread
from tests.jobs import conftest as control
from tests.quotas.builders import min_gpus
from workspaces.models import Membership, WorkspaceQuota

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

clock, sim, submit = control.clock, control.sim, control.submit
WS = "workspace_b"


@pytest.fixture
def objects(demo: Any, bob: Any, clock: Any, sim: Any, submit: Any) -> dict[str, Any]:
    """In bob's workspace: a running job, an instance and a service of 3 replicas with a rule."""

    def build() -> dict[str, Any]:
        quota = demo.quotas["Quota 1.1"]
        job = submit(bob, "resnet", replicas=2, gpus=8)
        svc = service_create(
            actor=bob,
            workspace=demo.workspaces[WS],
            quota=quota,
            name="embed-api",
            shape=Shape(replicas=1, gpu=1000),
            node_pools=[demo.node_pool],
            min_replicas=1,
            max_replicas=4,
            now=clock.now(),
        )
        service_scale(service=svc, replicas=3, now=clock.now(), actor=bob)
        rule = scaling_rule_create(
            service=svc, name="day", cron="0 8 * * *", timezone="UTC", target_replicas=3,
            now=clock.now(),
        )  # fmt: skip
        instance = instance_start(
            actor=bob,
            workspace=demo.workspaces[WS],
            quota=quota,
            name="notebook",
            shape=Shape(replicas=1, gpu=500),
            node_pools=[demo.node_pool],
            max_duration=7200,
            now=clock.now(),
        )
        for seconds in (1, 30):
            clock.advance(seconds)
            backend_sync(now=clock.now(), backend=sim)
            scheduling_cycle_run(now=clock.now(), backend=sim)
        return {
            "job": job,
            "service": svc,
            "rule": rule,
            "instance": instance,
            "bob": bob,
            "q11": quota,
            "q12": demo.quotas["Quota 1.2"],
        }

    built: dict[str, Any] = off_thread(build)
    return built


def _post_button(action: str) -> Callable[[Any, dict[str, Any]], None]:
    """Click the submit button of the form that posts to the action's URL."""

    def click(page: Any, o: dict[str, Any]) -> None:
        page.locator(f"form[action='{_url(action, o)}'] button[type=submit]").first.click()

    return click


def _url(action: str, o: dict[str, Any]) -> str:
    return {
        "cancel": reverse("jobs:job_cancel", args=[WS, o["job"].pk]),
        "stop": reverse("jobs:instance_stop", args=[WS, o["instance"].pk]),
        "rule": reverse("jobs:rule_delete", args=[WS, o["service"].pk, o["rule"].pk]),
        "scale": reverse("jobs:service_scale", args=[WS, o["service"].pk]),
        "remove": reverse("workspaces:member_remove", args=[WS, o["bob"].pk]),
        "unbind": reverse("workspaces:quota_unbind", args=[WS, o["q11"].pk]),
    }[action]


def _scale_service_to_1(page: Any, o: dict[str, Any]) -> None:
    form = page.locator(f"form[action='{_url('scale', o)}']")
    form.get_by_label("Target replicas").fill("1")
    form.locator("button[type=submit]").click()


def _scale_quota_to_40(page: Any, o: dict[str, Any]) -> None:
    page.get_by_label("A100-80G GPUs guaranteed").fill("40")
    page.get_by_role("button", name="Scale", exact=True).click()


def _rebalance_8(page: Any, o: dict[str, Any]) -> None:
    page.select_option("select[name=target]", label="Quota 1.2")
    page.select_option("select[name=node_pool]", label="A100-80G")
    page.fill("input[name=gpu]", "8")
    page.get_by_role("button", name="Rebalance", exact=True).click()


def _status(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda o: Workload.objects.get(pk=o[key].pk).status


@dataclass(frozen=True)
class Case:
    """One destructive action as a user takes it."""

    user: str
    start: Callable[[dict[str, Any]], str]  # the page that offers it
    click: Callable[[Any, dict[str, Any]], None]  # the first click there
    state: Callable[[dict[str, Any]], Any]  # what it changes, read from the database
    after: Any  # that state once confirmed
    says: str  # a number the confirmation states


CASES = {
    "cancel-job": Case(
        "bob",
        lambda o: reverse("jobs:job_detail", args=[WS, o["job"].pk]),
        _post_button("cancel"),
        _status("job"),
        "Cancelled",
        "2 running replicas (16 GPUs) stop.",
    ),
    "stop-instance": Case(
        "bob",
        lambda o: reverse("jobs:instance_list", args=[WS]),
        _post_button("stop"),
        _status("instance"),
        "Stopped",
        "notebook stops: 0.5 GPUs are freed",
    ),
    "delete-scaling-rule": Case(
        "bob",
        lambda o: reverse("jobs:service_detail", args=[WS, o["service"].pk]),
        _post_button("rule"),
        lambda o: ScalingRule.objects.filter(pk=o["rule"].pk).exists(),
        False,
        "It would next set embed-api to 3 replicas",
    ),
    "scale-service-down": Case(
        "bob",
        lambda o: reverse("jobs:service_detail", args=[WS, o["service"].pk]),
        _scale_service_to_1,
        lambda o: Workload.objects.get(pk=o["service"].pk).replicas,
        1,
        "embed-api: 3 → 1 replicas frees 2 GPUs",
    ),
    "remove-member": Case(
        "admin",
        lambda o: reverse("workspaces:detail", args=[WS]),
        _post_button("remove"),
        lambda o: Membership.objects.filter(workspace__name=WS, user=o["bob"]).exists(),
        False,
        "3 active workloads of theirs",
    ),
    "unbind-quota": Case(
        "admin",
        lambda o: reverse("workspaces:detail", args=[WS]),
        _post_button("unbind"),
        lambda o: WorkspaceQuota.objects.filter(workspace__name=WS, quota=o["q11"]).exists(),
        False,
        "workspace_b can no longer submit to Quota 1.1.",
    ),
    "scale-quota-down": Case(
        "admin",
        lambda o: f"/quotas/{o['q11'].pk}/scale/",
        _scale_quota_to_40,
        lambda o: min_gpus("Quota 1.1"),
        40,
        "Quota 1.1: A100-80G GPU min 48 → 40.",
    ),
    "rebalance": Case(
        "admin",
        lambda o: f"/quotas/{o['q11'].pk}/rebalance/",
        _rebalance_8,
        lambda o: (min_gpus("Quota 1.1"), min_gpus("Quota 1.2")),
        (40, 88),
        "Quota 1.2 A100-80G GPU min 80 → 88",
    ),
}


@pytest.mark.parametrize("name", list(CASES), ids=list(CASES))
def test_first_click_changes_nothing_and_the_confirmation_applies(
    name: str, objects: dict[str, Any], sign_in: Any, live_server: Any
) -> None:
    case = CASES[name]
    before = off_thread(lambda: case.state(objects))
    page = sign_in(case.user)
    page.goto(live_server.url + case.start(objects))
    with page.expect_navigation():
        case.click(page, objects)

    confirm = page.get_by_test_id("confirm")
    assert case.says in confirm.get_by_test_id("confirm-effects").inner_text()
    assert off_thread(lambda: case.state(objects)) == before

    with page.expect_navigation():
        confirm.get_by_test_id("confirm-button").click()
    assert page.get_by_test_id("confirm").count() == 0
    assert off_thread(lambda: case.state(objects)) == case.after
