"""A platform admin restricts a quota to one node pool and sees it on the Overview."""

from __future__ import annotations

from typing import Any

import pytest

from tests.quotas.builders import add_t4

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_admin_restricts_a_quota_to_a_node_pool(demo: Any, sign_in: Any, live_server: Any) -> None:
    add_t4(demo)
    page = sign_in("admin")
    page.goto(f"{live_server.url}/quotas/{demo.quotas['Quota 1.1'].pk}/")
    assert page.get_by_test_id("node-pools").inner_text().startswith("every node pool")
    page.get_by_role("link", name="Node pools", exact=True).click()
    page.get_by_label("A100-80G").check()
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(f"**/quotas/{demo.quotas['Quota 1.1'].pk}/")
    assert "Workloads of Quota 1.1 now run in A100-80G." in page.locator(".messages").inner_text()
    assert page.get_by_test_id("node-pools").inner_text().startswith("only A100-80G")
    audit = page.get_by_test_id("audit-log").locator("tbody tr").nth(0)
    assert "node pools every pool → A100-80G" in audit.inner_text()
