"""One name rule (console.names) for forms, API and services."""

from __future__ import annotations

import re

import pytest
from django import forms

from console.errors import DomainError
from console.names import check_display_name, check_dns_name, check_slug_name, workload_name
from jobs.forms import WorkloadForm
from quotas.forms import QuotaForm
from workspaces.forms import WorkspaceForm

GOOD_DNS = ["a", "resnet50-0001", "chat-api", "x" * 63, "0day"]
BAD_DNS = [
    ("", "Give a"),
    ("Train", "lower-case"),
    ("train_1", "lower-case"),
    ("-train", "start and end"),
    ("train-", "start and end"),
    ("x" * 64, "at most 63"),
    (" train", "space"),
    ("train ", "space"),
    ("tr\x00ain", "U+0000"),
    ("tr\u202eain", "U+202E"),
    ("tr\u2066ain", "U+2066"),
    ("tr\u200bain", "U+200B"),
]
GOOD_DISPLAY = ["Quota 1.1", "Équipe 2", "GPU pool (A100)"]
BAD_DISPLAY = [
    ("  ", "Give a"),
    (" Quota", "space"),
    ("Quota\t", "U+0009"),
    ("Quota\n1", "U+000A"),
    ("Quota \u202e1.1", "U+202E"),
]


@pytest.mark.parametrize("name", GOOD_DNS)
def test_dns_names_are_accepted(name: str) -> None:
    assert check_dns_name(name) == name


@pytest.mark.parametrize(("name", "words"), BAD_DNS, ids=[repr(n)[:20] for n, _ in BAD_DNS])
def test_bad_dns_names_are_refused_naming_the_field(name: str, words: str) -> None:
    with pytest.raises(DomainError) as error:
        check_dns_name(name, field="name", what="workload name")
    assert error.value.field == "name" and words in error.value.message


@pytest.mark.parametrize("name", GOOD_DISPLAY)
def test_display_names_may_hold_spaces_and_capitals(name: str) -> None:
    assert check_display_name(name) == name


@pytest.mark.parametrize(("name", "words"), BAD_DISPLAY, ids=[repr(n) for n, _ in BAD_DISPLAY])
def test_bad_display_names_are_refused(name: str, words: str) -> None:
    with pytest.raises(DomainError, match=re.escape(words)):
        check_display_name(name)


def test_workspace_names_are_slugs_without_edge_spaces() -> None:
    assert check_slug_name("workspace_b") == "workspace_b"
    with pytest.raises(DomainError, match="only letters"):
        check_slug_name("team d")
    with pytest.raises(DomainError, match="space"):
        check_slug_name("team-d ")


def test_the_validator_is_the_same_rule_for_forms() -> None:
    with pytest.raises(forms.ValidationError, match="lower-case"):
        workload_name("Train")
    # The forms neither trim a name nor skip the rule.
    for form_class, field in ((WorkloadForm, "name"), (QuotaForm, "name"), (WorkspaceForm, "name")):
        declared = form_class.base_fields[field]
        assert isinstance(declared, forms.CharField) and declared.strip is False
        assert declared.validators, form_class
