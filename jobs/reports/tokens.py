"""Report tokens: one per replica attempt, signed with SECRET_KEY, verified without a lookup.

A token is ``<pod id>.<workload id>.<attempt>.<signature>``: the signature is an HMAC-SHA256
of the three numbers under a key derived from SECRET_KEY, so nothing secret is stored and any
process of the console can check it. Whether the attempt is still live is the caller's
question (``accept``): a signature never expires by itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.utils.crypto import constant_time_compare, salted_hmac

if TYPE_CHECKING:
    from jobs.models import Pod

SALT = "tidepool.jobs.reports.token"
# Ids and attempts as the database holds them (18 digits, as the API's ID_REGEX).
_MAX_DIGITS = 18


@dataclass(frozen=True)
class Claim:
    """What a valid token speaks for: one attempt of one replica of one workload."""

    pod: int
    workload: int
    attempt: int


def _signature(pod: int, workload: int, attempt: int) -> str:
    """The HMAC of one attempt's numbers, in hex."""
    return salted_hmac(SALT, f"{pod}.{workload}.{attempt}", algorithm="sha256").hexdigest()


def report_token(pod: Pod) -> str:
    """The token of this pod's attempt."""
    numbers = (pod.pk, pod.workload_id, pod.attempt)
    return ".".join(str(n) for n in numbers) + "." + _signature(*numbers)


def token_claim(token: str) -> Claim | None:
    """The attempt a token was minted for, or None for anything this console did not sign."""
    parts = token.split(".")
    if len(parts) != 4 or not all(
        p.isascii() and p.isdigit() and len(p) <= _MAX_DIGITS for p in parts[:3]
    ):
        return None
    pod, workload, attempt = (int(p) for p in parts[:3])
    if not constant_time_compare(parts[3], _signature(pod, workload, attempt)):
        return None
    return Claim(pod=pod, workload=workload, attempt=attempt)
