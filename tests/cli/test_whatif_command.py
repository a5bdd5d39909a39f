"""`tidepool what-if`: platform admins replay a window; members get the API's refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.conftest import fails, login
from whatif.models import WhatIf
from whatif.services import whatif_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_dispatch(settings: Any) -> None:
    """Queue replays on the in-memory broker, where no worker takes them: the test runs them."""
    settings.CELERY_TASK_ALWAYS_EAGER = False


def test_admin_asks_for_a_what_if_with_short_forms(cli: Any, no_dispatch: None) -> None:
    login(cli, "admin")
    code, out, err = cli(
        "what-if",
        "--window",
        "24h",
        "--scale",
        "Quota 1.1=40",
        "--scale",
        "Quota 1.2=80",
        "--rebalance",
        "Quota 1.2>Quota 1.1=8",
        "--no-wait",
        "--json",
    )
    assert code == 0, err
    body = json.loads(out)
    assert body["status"] == "queued"
    assert [c["kind"] for c in body["changes"]] == ["scale", "scale", "rebalance"]
    whatif_run(whatif_id=body["id"])
    code, out, err = cli("what-if", "--window", "24h", "--weight", "Quota 1.1=2", "--no-wait")
    assert code == 0 and "queued" in out
    assert WhatIf.objects.get(pk=body["id"]).status == "done"


def test_a_bad_change_prints_the_field(cli: Any, no_dispatch: None) -> None:
    login(cli, "admin")
    err = fails(cli, "what-if", "--scale", "Quota 9=8", "--no-wait")
    assert "changes[0].quota" in err and "Quota 9" in err
    assert not WhatIf.objects.exists()


@pytest.mark.parametrize("member", ["alice", "bob"])
def test_members_are_refused(cli: Any, member: str, no_dispatch: None) -> None:
    login(cli, member)
    err = fails(cli, "what-if", "--rebalance", "Quota 1.2>Quota 1.1=8", "--no-wait")
    assert "platform admins" in err
    assert not WhatIf.objects.exists()
