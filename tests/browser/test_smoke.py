"""The console opens in a real browser and shows the quota tree to the platform admin."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_admin_logs_in_and_sees_the_quota_tree(demo, sign_in, live_server) -> None:
    page = sign_in("admin")
    assert page.url.endswith("/quotas/")
    assert page.locator("h1").inner_text() == "Resource Quota"
    assert page.locator("tr[data-quota='Quota 1'] .badge").inner_text() == "Child-level Preemption"
    assert page.locator("tr[data-quota='Quota 1.1']").count() == 1
