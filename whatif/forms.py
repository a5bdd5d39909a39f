"""The new what-if form: a window and the changes, as JSON (whatif.changes)."""

from __future__ import annotations

from django import forms

from whatif.choices import Window

CHANGES_HELP = (
    'A JSON list of changes, e.g. [{"kind": "rebalance", "from": "Quota 1.2", "to": "Quota 1.1", '
    '"gpus": 8}]. Kinds: scale, rebalance, child_preemption, lend_idle, weight, nodes, '
    "scaling_rules, calendar."
)


class WhatIfForm(forms.Form):
    """What to replay and under which changes."""

    window = forms.ChoiceField(choices=Window.choices, initial=Window.WEEK)
    start = forms.DateTimeField(required=False, help_text="Custom range only (UTC).")
    end = forms.DateTimeField(required=False, help_text="Custom range only (UTC).")
    changes = forms.CharField(widget=forms.Textarea(attrs={"rows": 8}), help_text=CHANGES_HELP)
