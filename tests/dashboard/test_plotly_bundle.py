"""The pages load npm's partial plotly.js bundle, and it holds every trace type they draw."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from tests.dashboard.factories import T0, samples


def _bundle_traces(path: Path) -> set[str]:
    """The trace types a plotly.js bundle registers."""
    return set(re.findall(r'moduleType:"trace",name:"(\w+)"', path.read_text()))


def _figure_traces(html: str, script_id: str) -> set[str]:
    """The trace types of the figures a page embeds for plotly."""
    found = re.search(rf'id="{script_id}" type="application/json">(.*?)</script>', html, re.S)
    assert found, script_id
    figures: dict[str, Any] = json.loads(found.group(1))
    return {t.get("type", "scatter") for f in figures.values() for t in f["data"]}


def test_the_dashboard_and_monitoring_charts_use_only_traces_the_bundle_has(
    demo: Any, login: Any, admin: Any
) -> None:
    for quota in demo.quotas.values():
        samples(quota, start=T0, minutes=90, in_quota=8000, preemptions=1)
    client = login(admin)
    dashboard = client.get(reverse("dashboard:cluster")).content.decode()
    monitoring = client.get(f"/quotas/{demo.quotas['Quota 1'].pk}/monitoring/").content.decode()
    used = _figure_traces(dashboard, "dashboard-figures") | _figure_traces(
        monitoring, "quota-figures"
    )
    assert used >= {"scatter", "bar", "indicator"}
    # `make install` ran npm ci: the partial bundle is installed and in use.
    assert settings.PLOTLY_BUNDLE == "plotly-finance/plotly-finance.min.js"
    assert used <= _bundle_traces(settings.PLOTLY_FINANCE / "plotly-finance.min.js")
    assert '<script src="/static/plotly-finance/plotly-finance.min.js" defer>' in dashboard


def test_without_npm_the_pages_load_the_plotly_packages_full_bundle(
    demo: Any, login: Any, admin: Any
) -> None:
    with override_settings(PLOTLY_BUNDLE="plotly/plotly.min.js"):
        body = login(admin).get(reverse("dashboard:cluster")).content.decode()
    assert '<script src="/static/plotly/plotly.min.js" defer></script>' in body
