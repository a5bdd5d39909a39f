"""Take one report: check its token and body, keep it in this process's buffer.

Both ways in end here: the Django view (``views``) and, in the embedded mode's fast path,
``console.serving`` before Django's handler chain. The answer is a status and a JSON body:

- 401 without a bearer token (``WWW-Authenticate: Bearer``);
- 403 for a token this console did not sign (garbage, or one with another workload's or
  attempt's numbers in it), and for an attempt that is no longer live (its pod ended, or its
  workload did);
- 400 naming the field and the reason, as every API refusal (an empty body is refused);
- 202 once the report is kept: the database sees it at the next flush.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from console import clock
from console.fast.statements import Statement
from jobs.choices import ACTIVE_STATUSES, LIVE_POD_STATUSES
from jobs.reports.body import NON_FIELD, BodyError, Report, report_parse
from jobs.reports.buffer import BUFFER
from jobs.reports.live import known_live
from jobs.reports.tokens import Claim, token_claim

UNAUTHENTICATED = "Send the header Authorization: Bearer <TIDEPOOL_REPORT_TOKEN>."
NOT_OURS = "This is not a report token of this console."
ENDED = "This replica attempt is no longer running; its token cannot report."
MAX_BODY = 4096  # bytes: a report is a few fields


@dataclass(frozen=True)
class Answer:
    """A status code and the JSON body that goes with it."""

    status: int
    body: dict[str, Any]

    def content(self) -> bytes:
        """The body as JSON bytes."""
        return json.dumps(self.body).encode()


ACCEPTED = Answer(202, {"detail": "Accepted."})


def _live(shape: tuple[()], pod: int, workload: int, attempt: int) -> Any:
    """The pod of this attempt, if it is Pending or Running in an active workload."""
    # Imported here: console.serving imports this module before Django's apps are loaded.
    from jobs.models import Pod

    return (
        Pod.objects.filter(
            pk=pod,
            workload_id=workload,
            attempt=attempt,
            status__in=LIVE_POD_STATUSES,
            workload__status__in=ACTIVE_STATUSES,
        )
        .order_by()
        .values("pk")
    )


# read on every report: compiled once, it costs the database's time only
_LIVE = Statement(_live)


def attempt_live(claim: Claim) -> bool:
    """Whether the attempt a token speaks for still runs (one indexed read)."""
    return bool(_LIVE.rows(claim.pod, claim.workload, claim.attempt))


def _checked(authorization: str, body: bytes) -> Answer | tuple[Claim, Report]:
    """The refusal of a report, or its claim and what it says (no database read)."""
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return Answer(401, {"detail": UNAUTHENTICATED})
    claim = token_claim(token.strip())
    if claim is None:
        return Answer(403, {"detail": NOT_OURS})
    if len(body) > MAX_BODY:
        return Answer(400, {NON_FIELD: [f"A report is at most {MAX_BODY} bytes, not {len(body)}."]})
    try:
        return claim, report_parse(body)
    except BodyError as e:
        return Answer(400, {e.field: [e.reason]})


def _keep(claim: Claim, report: Report) -> Answer:
    """Buffer a report of a live attempt."""
    BUFFER.add(pod=claim.pod, workload=claim.workload, report=report, at=clock.now())
    return ACCEPTED


def report_accept(*, authorization: str, body: bytes) -> Answer:
    """The answer to one report (the Authorization header's text, the raw body)."""
    checked = _checked(authorization, body)
    if isinstance(checked, Answer):
        return checked
    claim, report = checked
    if not known_live((claim.pod, claim.workload, claim.attempt)) and not attempt_live(claim):
        return Answer(403, {"detail": ENDED})
    return _keep(claim, report)


def report_answer_unread(*, authorization: str, body: bytes) -> Answer | None:
    """The answer if it needs no database read (a refusal, an attempt known live), else None.

    No query, so an event loop may call it: only the rest go to a thread (console.serving).
    """
    checked = _checked(authorization, body)
    if isinstance(checked, Answer):
        return checked
    claim, report = checked
    if known_live((claim.pod, claim.workload, claim.attempt)):
        return _keep(claim, report)
    return None
