"""Bad input: each change kind's validation error names the field and the reason."""

from __future__ import annotations

from typing import Any

import pytest

from whatif.changes import ChangeError, Names, from_options, validate_changes

NAMES = Names(
    quotas={"Quota 1", "Quota 1.1", "Quota 1.2"},
    pools={"A100-80G"},
    services={"workspace_a/chat-api"},
    siblings={"Quota 1": None, "Quota 1.1": "Quota 1", "Quota 1.2": "Quota 1"},
)
RULE = {"cron": "0 22 * * 1-5", "timezone": "Europe/Berlin", "action": "rebalance"}

BAD: list[tuple[str, Any, str, str]] = [
    ("unknown kind", {"kind": "grow"}, "changes[0].kind", "must be one of"),
    (
        "scale unknown quota",
        {"kind": "scale", "quota": "Quota 9", "gpus": 8},
        "changes[0].quota",
        "no 'Quota 9'",
    ),
    (
        "scale negative gpus",
        {"kind": "scale", "quota": "Quota 1.1", "gpus": -1},
        "changes[0].gpus",
        "negative",
    ),
    (
        "scale gpus not a number",
        {"kind": "scale", "quota": "Quota 1.1", "gpus": "lots"},
        "changes[0].gpus",
        "number",
    ),
    (
        "rebalance same quota",
        {"kind": "rebalance", "from": "Quota 1.1", "to": "Quota 1.1", "gpus": 8},
        "changes[0].to",
        "another quota",
    ),
    (
        "rebalance not siblings",
        {"kind": "rebalance", "from": "Quota 1.1", "to": "Quota 1", "gpus": 8},
        "changes[0].to",
        "not a sibling",
    ),
    (
        "rebalance zero gpus",
        {"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 1.1", "gpus": 0},
        "changes[0].gpus",
        "more than 0",
    ),
    (
        "rebalance missing from",
        {"kind": "rebalance", "to": "Quota 1.1", "gpus": 8},
        "changes[0].from",
        "non-empty name",
    ),
    (
        "child preemption not a flag",
        {"kind": "child_preemption", "quota": "Quota 1", "on": "yes"},
        "changes[0].on",
        "true or false",
    ),
    (
        "lend idle unknown quota",
        {"kind": "lend_idle", "quota": "", "on": False},
        "changes[0].quota",
        "non-empty name",
    ),
    (
        "weight zero",
        {"kind": "weight", "quota": "Quota 1.1", "weight": 0},
        "changes[0].weight",
        "more than 0",
    ),
    (
        "nodes unknown pool",
        {"kind": "nodes", "pool": "H100", "add": 2},
        "changes[0].pool",
        "no 'H100'",
    ),
    (
        "nodes fraction",
        {"kind": "nodes", "pool": "A100-80G", "add": 1.5},
        "changes[0].add",
        "whole number",
    ),
    (
        "rules unknown service",
        {"kind": "scaling_rules", "service": "nope", "rules": []},
        "changes[0].service",
        "no 'nope'",
    ),
    (
        "rules bad cron",
        {
            "kind": "scaling_rules",
            "service": "workspace_a/chat-api",
            "rules": [{"cron": "61 8 * * *", "replicas": 8}],
        },
        "changes[0].rules[0].cron",
        "minute",
    ),
    (
        "rules bad zone",
        {
            "kind": "scaling_rules",
            "service": "workspace_a/chat-api",
            "rules": [{"cron": "0 8 * * *", "timezone": "Mars/Base", "replicas": 8}],
        },
        "changes[0].rules[0].timezone",
        "Unknown time zone",
    ),
    (
        "rules bad replicas",
        {
            "kind": "scaling_rules",
            "service": "workspace_a/chat-api",
            "rules": [{"cron": "0 8 * * *", "replicas": -2}],
        },
        "changes[0].rules[0].replicas",
        "negative",
    ),
    (
        "calendar bad action",
        {"kind": "calendar", "rule": {**RULE, "action": "delete"}},
        "changes[0].rule.action",
        "must be one of",
    ),
    (
        "calendar bad date",
        {
            "kind": "calendar",
            "rule": {
                **RULE,
                "exclude_dates": ["25/12"],
                "quota": "Quota 1.2",
                "to": "Quota 1.1",
                "gpus": 32,
            },
        },
        "changes[0].rule.exclude_dates[0]",
        "not a date",
    ),
    (
        "calendar bad cron",
        {
            "kind": "calendar",
            "rule": {
                **RULE,
                "cron": "0 25 * * *",
                "quota": "Quota 1.2",
                "to": "Quota 1.1",
                "gpus": 32,
            },
        },
        "changes[0].rule.cron",
        "hour",
    ),
    (
        "calendar rebalance unknown to",
        {"kind": "calendar", "rule": {**RULE, "quota": "Quota 1.2", "to": "Quota 7", "gpus": 32}},
        "changes[0].rule.to",
        "no 'Quota 7'",
    ),
]


@pytest.mark.parametrize(
    ("change", "field", "reason"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_each_bad_change_names_its_field(change: Any, field: str, reason: str) -> None:
    with pytest.raises(ChangeError) as caught:
        validate_changes([change], NAMES)
    assert caught.value.field == field
    assert reason in caught.value.reason
    assert str(caught.value).startswith(field)


def test_an_empty_list_or_non_json_is_refused_on_changes() -> None:
    for raw in ([], "not json", {"kind": "scale"}):
        with pytest.raises(ChangeError) as caught:
            validate_changes(raw, NAMES)
        assert caught.value.field == "changes"


def test_the_prefill_contract_kinds_are_accepted_as_given() -> None:
    changes = [
        {"kind": "scale", "quota": "Quota 1.1", "gpus": 56},
        {"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 1.1", "gpus": 8},
        {"kind": "child_preemption", "quota": "Quota 1", "on": True},
        {"kind": "lend_idle", "quota": "Quota 1.2", "on": False},
        {"kind": "weight", "quota": "Quota 1.1", "weight": 2},
        {"kind": "nodes", "pool": "A100-80G", "add": -2},
        {
            "kind": "scaling_rules",
            "service": "workspace_a/chat-api",
            "rules": [{"cron": "0 8 * * *", "timezone": "UTC", "replicas": 8}],
        },
        {
            "kind": "calendar",
            "rule": {
                **RULE,
                "exclude_dates": ["2026-12-25"],
                "quota": "Quota 1.2",
                "to": "Quota 1.1",
                "gpus": 32,
            },
        },
    ]
    checked = validate_changes(changes, NAMES)
    assert [c["kind"] for c in checked] == [c["kind"] for c in changes]
    assert checked[7]["rule"]["to"] == "Quota 1.1" and checked[7]["rule"]["gpus"] == 32


def test_cli_short_forms_become_changes_and_bad_shapes_name_the_option() -> None:
    changes = from_options(
        scale=["Quota 1.1=56"], rebalance=["Quota 1.2>Quota 1.1=8"], nodes=["A100-80G=-1"]
    )
    assert changes == [
        {"kind": "scale", "quota": "Quota 1.1", "gpus": 56.0},
        {"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 1.1", "gpus": 8.0},
        {"kind": "nodes", "pool": "A100-80G", "add": -1},
    ]
    with pytest.raises(ChangeError) as caught:
        from_options(rebalance=["Quota 1.2=8"])
    assert caught.value.field == "--rebalance"
