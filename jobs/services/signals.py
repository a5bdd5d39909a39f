"""Signals from running workloads, read the same way whichever backend runs them.

Heartbeats and progress tell a hung replica (hang detection), exit codes and termination
messages choose between retry and failure (the ExitCodeAndErrorMsg policy), and activity keeps
an interactive instance from its idle auto-stop. The Kubernetes backend's pods send these
through the report endpoint; the simulated backend writes the same rows itself. Backend sync
(jobs.services.sync) and the time limits (jobs.services.limits) act on what is decided here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Prefetch

from console.errors import DomainError
from jobs.choices import FailurePolicy, Kind, PodStatus, Status
from jobs.models import Pod, Workload

MAX_RULES = 20  # entries per list: a policy, not a log filter
MAX_PATTERN = 200  # characters per message pattern
SHOWN_PATTERN = 60  # characters of a pattern a rule names (the reasons it goes in are bounded)
EXIT_CODES = range(1, 256)  # what a container's process can exit with, 0 being success


@dataclass(frozen=True)
class Verdict:
    """What an ExitCodeAndErrorMsg policy makes of a failure, and the rule that said so."""

    retry: bool
    rule: str


@dataclass(frozen=True)
class Hang:
    """A running training job with a replica silent for its hang-detection window."""

    workload: Workload
    replica: int


def _shown(pattern: str) -> str:
    """A pattern as a rule names it, clipped to fit a status reason."""
    if len(pattern) > SHOWN_PATTERN:
        pattern = pattern[: SHOWN_PATTERN - 1] + "…"
    return repr(pattern)


def _matching(patterns: Sequence[str], message: str) -> str | None:
    """The first pattern found in the message (a regular expression, searched)."""
    return next((p for p in patterns if message and re.search(p, message)), None)


def failure_verdict(w: Workload, *, exit_code: int | None, message: str) -> Verdict | None:
    """Retry or fail a replica's failure by the job's lists; None: the policy is "any".

    PAI's semantics: the fail lists win; then only a listed retry condition is retried, and
    any other failure fails the job.
    """
    if w.failure_policy != FailurePolicy.EXIT_CODE_AND_ERROR_MSG:
        return None
    code = "no exit code" if exit_code is None else f"exit code {exit_code}"
    if exit_code is not None and exit_code in w.fail_exit_codes:
        return Verdict(False, f"{code} is in the fail list")
    pattern = _matching(w.fail_messages, message)
    if pattern is not None:
        return Verdict(False, f"the message matches {_shown(pattern)} in the fail list")
    if exit_code is not None and exit_code in w.retry_exit_codes:
        return Verdict(True, f"{code} is in the retry list")
    pattern = _matching(w.retry_messages, message)
    if pattern is not None:
        return Verdict(True, f"the message matches {_shown(pattern)} in the retry list")
    return Verdict(False, f"{code} and its message match no retry rule")


def _codes(values: Any, field: str) -> list[int]:
    """A list of exit codes 1-255, without repeats."""
    if not isinstance(values, list | tuple):
        raise DomainError("Give a list of exit codes, such as [137, 143].", field=field)
    codes: list[int] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value not in EXIT_CODES:
            raise DomainError(
                f"Exit code {value!r} is not a whole number from 1 to 255.", field=field
            )
        if value not in codes:
            codes.append(value)
    if len(codes) > MAX_RULES:
        raise DomainError(f"At most {MAX_RULES} exit codes, not {len(codes)}.", field=field)
    return codes


def _patterns(values: Any, field: str) -> list[str]:
    """A list of message patterns, each a valid regular expression."""
    if not isinstance(values, list | tuple):
        raise DomainError('Give a list of message patterns, such as ["NCCL error"].', field=field)
    patterns: list[str] = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise DomainError("A message pattern must be non-empty text.", field=field)
        if len(value) > MAX_PATTERN:
            raise DomainError(
                f"A message pattern is at most {MAX_PATTERN} characters, not {len(value)}.",
                field=field,
            )
        try:
            re.compile(value)
        except re.error as error:
            raise DomainError(
                f"{value!r} is not a valid regular expression: {error}.", field=field
            ) from error
        if value not in patterns:
            patterns.append(value)
    if len(patterns) > MAX_RULES:
        raise DomainError(f"At most {MAX_RULES} patterns, not {len(patterns)}.", field=field)
    return patterns


def failure_policy_check(
    *,
    failure_policy: str,
    retry_exit_codes: Any = (),
    retry_messages: Any = (),
    fail_exit_codes: Any = (),
    fail_messages: Any = (),
) -> dict[str, Any]:
    """The policy's fields, checked and without repeats, as the Workload row stores them."""
    if failure_policy not in FailurePolicy.values:
        raise DomainError(
            f"Failure policy {failure_policy!r} is not one of {', '.join(FailurePolicy.values)}.",
            field="failure_policy",
        )
    values: dict[str, Any] = {
        "failure_policy": failure_policy,
        "retry_exit_codes": _codes(retry_exit_codes, "retry_exit_codes"),
        "retry_messages": _patterns(retry_messages, "retry_messages"),
        "fail_exit_codes": _codes(fail_exit_codes, "fail_exit_codes"),
        "fail_messages": _patterns(fail_messages, "fail_messages"),
    }
    both = set(values["retry_exit_codes"]) & set(values["fail_exit_codes"])
    if both:
        raise DomainError(
            f"Exit code {min(both)} is in both the retry and the fail list.",
            field="fail_exit_codes",
        )
    listed = any(values[f] for f in values if f != "failure_policy")
    if failure_policy == FailurePolicy.ANY and listed:
        raise DomainError(
            "Exit codes and message patterns apply only with the ExitCodeAndErrorMsg policy.",
            field="failure_policy",
        )
    return values


def _latest(*times: datetime | None) -> datetime | None:
    """The latest of the times given (None where none is)."""
    known = [t for t in times if t is not None]
    return max(known) if known else None


def hangs_find(*, now: datetime) -> list[Hang]:
    """Running training with a running replica that sent no heartbeat and made no progress
    for its job's hang_minutes (counted from the attempt's start when it never did)."""
    running = Prefetch(
        "pods", queryset=Pod.objects.filter(status=PodStatus.RUNNING), to_attr="running_pods"
    )
    candidates = (
        Workload.objects.filter(kind=Kind.TRAINING, status=Status.RUNNING, hang_minutes__gt=0)
        .select_related("workspace", "quota")
        .prefetch_related(running)
    )
    hangs = []
    for w in candidates:
        window = timedelta(minutes=w.hang_minutes or 0)
        for pod in w.running_pods:
            last = _latest(pod.last_heartbeat_at, w.last_progress_at, pod.started_at, w.started_at)
            if last is not None and last <= now - window:
                hangs.append(Hang(w, pod.index))
                break
    return hangs


def idle_since(instance: Workload) -> datetime | None:
    """Since when an interactive instance has been idle: its last activity, else its start."""
    return _latest(instance.last_activity_at, instance.started_at)
