"""The Grafana dashboard and the alerting rules query only listed metrics, and the alerts fire."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from . import promql
from .conftest import DEPLOY

DASHBOARD = DEPLOY / "grafana" / "tidepool.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yaml"
ALERTS_TEST = DEPLOY / "prometheus" / "alerts_test.yaml"
METRICS = promql.metric_list()
# Grafana's variables, as Prometheus would see them once Grafana substituted them.
VARIABLES = {"$__rate_interval": "5m", "$quota": ".*", "$pool": ".*"}


def panels() -> list[dict[str, Any]]:
    data = json.loads(DASHBOARD.read_text())
    out = []
    for p in data["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # a collapsed row keeps its panels inside
    return out


def expr_of(target: dict[str, Any]) -> str:
    expr = target["expr"]
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"unknown variable in {expr!r}"
    return expr


def queries() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(panel, target) for every query of the dashboard."""
    return [(p, t) for p in panels() for t in p.get("targets", [])]


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [r for g in groups for r in g["rules"]]


def test_metric_list_is_well_formed() -> None:
    assert len(METRICS) == 19
    types = {m.type for m in METRICS.values()}
    assert types == {"gauge", "counter", "histogram"}
    for m in METRICS.values():
        assert re.fullmatch(r"tidepool_[a-z_]+", m.name), m.name
        assert m.name.endswith("_total") == (m.type == "counter"), m.name
        assert "job" not in m.labels and "job_name" not in m.labels  # bounded labels only
        assert m.help
    quota_gauges = [
        n for n in METRICS if n.startswith("tidepool_quota_") and n != "tidepool_quota_workloads"
    ]
    assert len(quota_gauges) == 6
    for name in quota_gauges:
        assert METRICS[name].labels == {"quota", "pool", "resource"}


def test_dashboard_parses_and_queries_only_listed_metrics() -> None:
    data = json.loads(DASHBOARD.read_text())
    assert data["uid"] == "tidepool" and data["title"]
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
    assert queries()
    used = set()
    for panel, target in queries():
        q = promql.check(expr_of(target), METRICS)
        used |= {u.metric for u in q.uses}
        labels = set().union(*(METRICS[u.metric].labels for u in q.uses)) | promql.TARGET_LABELS
        legend = set(re.findall(r"{{\s*(\w+)\s*}}", target.get("legendFormat", "")))
        assert legend <= labels | q.grouping, f"{panel['title']}: legend {legend - labels}"
        assert (
            target["datasource"]
            == panel["datasource"]
            == {
                "type": "prometheus",
                "uid": "${datasource}",
            }
        )
    # The panels the issue asks for.
    by_title = {p["title"]: [t["expr"] for t in p.get("targets", [])] for p in panels()}
    gpus = " ".join(by_title["GPUs In Quota against borrowed"])
    assert "tidepool_quota_allocated_in_quota" in gpus and "tidepool_quota_borrowed" in gpus
    assert any("tidepool_quota_pending_demand" in " ".join(e) for e in by_title.values())
    assert any("tidepool_preemptions_total" in " ".join(e) for e in by_title.values())
    assert any(
        "histogram_quantile" in x and "tidepool_cycle_duration_seconds_bucket" in x
        for e in by_title.values()
        for x in e
    )
    assert any("tidepool_last_sync_age_seconds" in " ".join(e) for e in by_title.values())
    assert used == set(METRICS), f"metrics no panel shows: {set(METRICS) - used}"


def test_dashboard_variables_use_listed_labels() -> None:
    data = json.loads(DASHBOARD.read_text())
    for var in data["templating"]["list"]:
        if var["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", var["query"]["query"])
        assert m, var["query"]
        assert m.group(1) in METRICS and m.group(2) in METRICS[m.group(1)].labels
        assert f"${var['name']}" in VARIABLES


def test_alert_rules_parse_and_query_listed_metrics() -> None:
    rules = {r["alert"]: r for r in alert_rules()}
    assert {
        "TidepoolNoSchedulingCycle",
        "TidepoolQuotaStarved",
        "TidepoolBackendSyncStalled",
    } <= set(rules)
    for rule in rules.values():
        q = promql.check(rule["expr"], METRICS)
        assert rule["labels"]["severity"] in ("critical", "warning")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        for text in rule["annotations"].values():
            for label in re.findall(r"\$labels\.(\w+)", text):
                assert label in q.grouping, f"{rule['alert']}: {label} is aggregated away"
    cycle = rules["TidepoolNoSchedulingCycle"]
    assert [u.metric for u in promql.analyse(cycle["expr"], METRICS).uses] == [
        "tidepool_last_cycle_age_seconds"
    ]
    assert cycle["expr"].strip().endswith("> 120")
    starved = rules["TidepoolQuotaStarved"]
    assert starved["for"] == "1h"
    assert {u.metric for u in promql.analyse(starved["expr"], METRICS).uses} == {
        "tidepool_quota_pending_demand",
        "tidepool_quota_allocated_in_quota",
        "tidepool_quota_guaranteed",
    }
    sync = rules["TidepoolBackendSyncStalled"]
    assert "tidepool_last_sync_age_seconds" in sync["expr"]


PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    not PROMTOOL, reason="promtool is not installed (Debian's prometheus package has it)"
)


def promtool(*args: str, cwd: Path) -> None:
    assert PROMTOOL
    done = subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_promtool_checks_the_alert_rules() -> None:
    promtool("check", "rules", ALERTS.name, cwd=ALERTS.parent)


@needs_promtool
def test_alerts_fire_when_they_should() -> None:
    """deploy/prometheus/alerts_test.yaml: each alert at its threshold, and not before."""
    promtool("test", "rules", ALERTS_TEST.name, cwd=ALERTS_TEST.parent)


@needs_promtool
def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    """Each panel's query, as a recording rule, goes through Prometheus's own parser."""
    rules = [
        {
            "record": f"tidepool_dashboard:panel{panel['id']}:{target['refId']}",
            "expr": expr_of(target),
        }
        for panel, target in queries()
    ]
    (tmp_path / "dashboard.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]})
    )
    promtool("check", "rules", "dashboard.yaml", cwd=tmp_path)


def test_dashboard_panels_do_not_overlap() -> None:
    cells: dict[tuple[int, int], str] = {}
    for p in panels():
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]
