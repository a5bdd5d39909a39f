"""Scheduling Configuration → Resource Usage in a real browser, and workspace isolation."""

from __future__ import annotations

from typing import Any

import pytest

from workspaces.models import ResourceUsageRule

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_admin_adds_a_viewer_rule_and_it_survives_reload(
    demo: Any, sign_in: Any, live_server: Any
) -> None:
    page = sign_in("admin")
    page.click("a[href='/workspaces/']")
    page.click("tr[data-workspace='workspace_b'] a")
    assert page.locator("h1").inner_text() == "Workspaces / workspace_b"
    page.click("nav.tabs >> text=Scheduling Configuration")
    page.click("nav.tabs.sub >> text=Resource Usage")
    assert page.locator("#rule-rows tr.rule").count() == 2

    page.click("text=+ Add")
    row = page.locator("#rule-rows tr.rule").last
    row.locator("select[name=quota]").select_option(label="Quota 1.1")
    row.locator("select[name=role]").select_option("viewer")
    row.locator("input[name=max_gpus]").fill("8")
    page.click("#save-rules")
    page.wait_for_load_state()
    assert "Resource usage saved: 3 rules." in page.locator(".messages").inner_text()

    page.reload()
    viewer = page.locator("#rule-rows tr.rule[data-role='viewer']")
    assert viewer.locator("input[name=max_gpus]").input_value() == "8"
    rule = ResourceUsageRule.objects.get(workspace__name="workspace_b", role="viewer")
    assert (rule.quota.name, rule.max_gpus, rule.max_priority) == ("Quota 1.1", 8000, None)

    # a bad cap is refused whole, naming the rule and the reason
    page.click("text=+ Add")
    bad = page.locator("#rule-rows tr.rule").last
    bad.locator("select[name=role]").select_option("operator")
    bad.locator("input[name=max_gpus]").fill("lots")
    page.click("#save-rules")
    page.wait_for_load_state()
    alert = page.get_by_test_id("rules-error").inner_text()
    assert "Rule 4: max GPUs: 'lots' is not a number of GPUs." in alert
    assert ResourceUsageRule.objects.filter(workspace__name="workspace_b").count() == 3


def test_bob_sees_workspace_b_only(demo: Any, sign_in: Any, live_server: Any) -> None:
    page = sign_in("bob")
    assert page.url.endswith("/workspaces/")
    assert page.locator("tr[data-workspace='workspace_b']").count() == 1
    assert page.locator("tr[data-workspace='workspace_c']").count() == 0
    assert "Node Pools" not in page.locator("header").inner_text()
    response = page.goto(f"{live_server.url}/workspaces/workspace_c/")
    assert response.status == 404
    response = page.goto(f"{live_server.url}/workspaces/workspace_c/scheduling/resource-usage/")
    assert response.status == 404
    response = page.goto(f"{live_server.url}/workspaces/workspace_b/")
    assert response.status == 200
    assert page.get_by_test_id("my-role").inner_text() == "Developer"
