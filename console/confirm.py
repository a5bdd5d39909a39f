"""One confirmation step for every action that ends work or cuts a guarantee.

A POST without confirm=1 answers a page (templates/_confirm.html) that states the effect in
numbers and re-posts the same fields with confirm=1; only that second POST applies. It needs no
JavaScript, so any button that posts to such a view gets the step for free.

The page also carries the facts its numbers came from (`seen`). A confirm whose facts no longer
hold (a replica started, the job ended, another job lost its label) is shown the page again,
with the new numbers, instead of applying what the user did not see. A client that posts
confirm=1 without `seen` (a script that has decided) applies at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

CONFIRM = "confirm"
SEEN = "seen"
# Never re-posted: the token comes fresh with the page, the rest belong to this step.
_OWN_FIELDS = frozenset({"csrfmiddlewaretoken", CONFIRM, SEEN, "back"})


@dataclass(frozen=True)
class Confirmation:
    """What a confirmation page says: the question, its effects in numbers and the button."""

    title: str  # "Cancel training job resnet"
    effects: Sequence[str]  # one sentence each, with the numbers
    action: str  # the confirming button: "Cancel job"
    back: str  # where "Keep it" leads when the page that asked is not known
    facts: str = ""  # the numbers behind the effects; a change makes the confirm stale
    keep: str = "Keep it"  # the other button's words
    context: dict[str, Any] = field(default_factory=dict)  # the page's chrome (workspace tabs)


def asked(request: HttpRequest) -> bool:
    """Whether this POST carries the confirmation (fresh or stale)."""
    return request.POST.get(CONFIRM) == "1"


def confirmed(request: HttpRequest, confirmation: Confirmation) -> bool:
    """Whether this POST confirms the effect that is true now: not a first click, not stale."""
    if not asked(request):
        return False
    seen = request.POST.get(SEEN)
    return seen is None or seen == confirmation.facts


def reposted(request: HttpRequest) -> list[tuple[str, str]]:
    """The fields of the first POST, to send again with the confirmation."""
    return [
        (name, value)
        for name in request.POST
        if name not in _OWN_FIELDS
        for value in request.POST.getlist(name)
    ]


def confirm_page(
    request: HttpRequest,
    confirmation: Confirmation,
    *,
    template: str = "_confirm.html",
    extra: dict[str, Any] | None = None,
) -> HttpResponse:
    """The step before the change: its effects, the same fields again, Confirm and Keep it."""
    context = {
        **confirmation.context,
        "confirmation": confirmation,
        "back": _came_from(request) or confirmation.back,
        "fields": reposted(request),
        "seen": confirmation.facts,
        # Only a confirm that is not `confirmed` comes back here with confirm=1: it was stale.
        "stale": asked(request),
        **(extra or {}),
    }
    return render(request, template, context)


def _came_from(request: HttpRequest) -> str:
    """The page whose button led here (this site's, and not this action's own URL), or ""."""
    referer = request.headers.get("referer", "")
    safe = url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    if not referer or not safe or urlsplit(referer).path == request.path:
        return ""
    return referer


def confirm_or_apply(request: HttpRequest, confirmation: Confirmation) -> HttpResponse | None:
    """The confirmation page, or None when the POST confirms and the view should apply."""
    if confirmed(request, confirmation):
        return None
    return confirm_page(request, confirmation)


def plural(count: int, one: str, many: str | None = None) -> str:
    """ "1 running job", "2 running jobs": the count with the right form of the noun."""
    return f"{count} {one if count == 1 else (many or one + 's')}"
