"""A platform admin adds quotas, is refused a scale, rebalances, and reads the audit log."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def row(page: Any, name: str) -> Any:
    """The tree row of one quota."""
    return page.locator(f"tr[data-quota='{name}']")


def action(page: Any, name: str, label: str) -> Any:
    """A link of a tree row's action menu, with the menu opened."""
    row(page, name).locator("details.row-menu summary").click()
    return row(page, name).get_by_role("link", name=label, exact=True)


def min_gpus(page: Any, name: str) -> str:
    """The guaranteed GPUs a tree row shows."""
    return row(page, name).locator("[data-resource='gpu'] [data-bound='min']").inner_text()


def test_admin_adds_quotas_is_refused_a_scale_and_rebalances(demo, sign_in) -> None:
    page = sign_in("admin")
    assert page.get_by_role("heading", name="Resource Quota").is_visible()
    assert page.get_by_test_id("unassigned-A100-80G").inner_text().startswith("A100-80G")

    # Quota 1 holds all 128 GPUs, so a new root quota with GPUs is refused...
    page.get_by_role("link", name="Add Resource Quota").click()
    page.get_by_label("Name", exact=True).fill("Quota 2")
    page.get_by_label("A100-80G GPUs guaranteed").fill("8")
    page.get_by_label("A100-80G CPU cores guaranteed").fill("16")
    page.get_by_role("button", name="Create").click()
    gpu = page.get_by_label("A100-80G GPUs guaranteed")
    assert gpu.get_attribute("aria-invalid") == "true"
    error = page.locator(f"#{gpu.get_attribute('aria-describedby')}")
    assert "At most 0 GPUs fit for Quota 2." in error.inner_text()
    # ...and one with CPU only is created.
    page.get_by_label("A100-80G GPUs guaranteed").fill("0")
    page.get_by_role("button", name="Create").click()
    page.wait_for_url("**/quotas/")
    assert "Created quota Quota 2." in page.locator(".messages").inner_text()
    assert row(page, "Quota 2").count() == 1

    # A child of Quota 2, with the parent fixed.
    action(page, "Quota 2", "New Child-level Resource Quota").click()
    assert page.get_by_test_id("parent").inner_text() == "Quota 2"
    page.get_by_label("Name", exact=True).fill("Quota 2.1")
    page.get_by_label("A100-80G CPU cores guaranteed").fill("8")
    page.get_by_label("Child-level preemption").check()
    page.get_by_role("button", name="Create").click()
    page.wait_for_url("**/quotas/")
    assert row(page, "Quota 2.1").get_attribute("class") == "depth-1"
    assert row(page, "Quota 2.1").locator(".badge").inner_text() == "Child-level Preemption"

    # Scaling Quota 1.1 to 56 while Quota 1.2 holds 80 of Quota 1's 128 is refused.
    action(page, "Quota 1.1", "Scale").click()
    gpu = page.get_by_label("A100-80G GPUs guaranteed")
    assert gpu.input_value() == "48"
    gpu.fill("56")
    page.get_by_role("button", name="Scale").click()
    assert page.get_by_text(
        "Quota 1 has 128 GPUs on A100-80G and its children would need 136 GPUs "
        "(Quota 1.1 56 GPUs + Quota 1.2 80 GPUs). At most 48 GPUs fit for Quota 1.1."
    ).is_visible()
    page.get_by_role("link", name="Cancel").click()
    assert min_gpus(page, "Quota 1.1") == "48"

    # Rebalance 8 GPUs from Quota 1.2 to Quota 1.1 in one step: 56 / 72.
    action(page, "Quota 1.2", "Rebalance").click()
    page.get_by_label("To quota").select_option(label="Quota 1.1")
    page.get_by_label("GPUs", exact=True).fill("8")
    page.get_by_role("button", name="Rebalance").click()
    # It asks first, though no running job is touched, and says what moves.
    effects = page.get_by_test_id("confirm-effects").inner_text()
    assert "Quota 1.2 A100-80G GPU min 80 → 72" in effects
    assert "No running job is affected" in effects
    page.get_by_role("button", name="Confirm rebalance").click()
    page.wait_for_url("**/quotas/")
    assert (min_gpus(page, "Quota 1.1"), min_gpus(page, "Quota 1.2")) == ("56", "72")

    # The Overview's audit log shows the rebalance and, below it, the earlier create.
    action(page, "Quota 1.1", "Overview").click()
    audit = page.get_by_test_id("audit-log")
    entries = audit.locator("tbody tr")
    assert entries.nth(0).get_attribute("data-action") == "rebalance"
    assert "Quota 1.1: A100-80G GPU min 48 → 56" in entries.nth(0).inner_text()
    assert "Quota 1.2: A100-80G GPU min 80 → 72" in entries.nth(0).inner_text()
    assert entries.nth(1).get_attribute("data-action") == "create"
    assert "A100-80G GPU min 48" in entries.nth(1).inner_text()
    assert "admin" in entries.nth(0).inner_text()

    # The child-level preemption toggle on the Overview.
    page.get_by_role("button", name="Turn child-level preemption on").click()
    assert "Child-level preemption of Quota 1.1 is on." in page.locator(".messages").inner_text()
    assert page.get_by_role("heading", name="Quota 1.1").locator(".badge").is_visible()
    assert entries.nth(0).get_attribute("data-action") == "toggle"
