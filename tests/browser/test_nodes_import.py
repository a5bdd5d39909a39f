"""A platform admin imports a small CSV through the Import nodes page and sees the nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SPEC = (
    "name,pool,gpus,cpu,memory,labels\nt4-01,T4,4,32000,131072,rack=r1\nt4-02,T4,4,32000,131072\n"
)


def test_admin_imports_csv_and_sees_the_nodes(
    demo: Any, sign_in: Any, live_server: Any, tmp_path: Path
) -> None:
    spec = tmp_path / "t4.csv"
    spec.write_text(SPEC)
    page = sign_in("admin")
    page.click("header >> text=Node Pools")
    page.click("text=Import nodes")
    page.set_input_files("input[name=file]", str(spec))
    page.click("button:has-text('Import')")
    page.wait_for_load_state()
    assert "Imported 2 nodes with 8 GPUs in 1 node pools." in page.locator(".messages").inner_text()
    t4 = page.locator("tr[data-pool='T4']")
    assert t4.get_by_test_id("nodes").inner_text() == "2"
    assert t4.get_by_test_id("gpus").inner_text() == "8"

    t4.locator("a").click()
    assert page.locator("tr[data-node]").count() == 2
    assert "rack=r1" in page.locator("tr[data-node='t4-01']").inner_text()

    # a bad file is refused whole, with the line and the reason
    spec.write_text("name,pool,gpus,cpu,memory\nt4-03,T4,4,32000,131072\nt4-04,T4,four,1,1\n")
    page.goto(f"{live_server.url}/nodes/import/")
    page.set_input_files("input[name=file]", str(spec))
    page.click("button:has-text('Import')")
    error = page.get_by_test_id("file-error").inner_text()
    assert "line 3: gpus 'four' is not a whole number. Nothing was imported." in error
    page.goto(f"{live_server.url}/nodes/")
    assert page.locator("tr[data-pool='T4']").get_by_test_id("nodes").inner_text() == "2"
