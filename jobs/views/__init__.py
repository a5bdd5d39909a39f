"""Workspace-scoped workload pages: training jobs, inference services, interactive instances.

Access is decided once, in workspaces.pages.WorkspacePageMixin: a workspace the user cannot
see (and every workload in it) answers 404; a page that needs more than viewing answers 403 to
viewers; anonymous users go to login.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, overload

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.views.generic import FormView

from console import clock
from console.errors import DomainError
from jobs.choices import FailurePolicy, Kind, PodStatus, Status
from jobs.models import Pod, Workload, WorkloadEvent
from jobs.progress import NO_CHECKPOINT, percent, restarts_text
from jobs.visibility import BORROWED, entry_nodes, hidden_nodes, scrub, sees_borrowed_nodes
from workspaces.pages import WorkspacePageMixin
from workspaces.roles import SUBMIT


def age(seconds: float) -> str:
    """A short duration: 45s, 12m, 3h 05m, 2d 4h."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def quota_label(in_quota: bool | None, status: str = Status.RUNNING) -> str:
    """The Quota status column: In Quota, Not in Quota, or nothing while not running (queued,
    requeued or finished: a finished job holds no quota)."""
    if in_quota is None or status != Status.RUNNING:
        return ""
    return "In Quota" if in_quota else "Not in Quota"


class PodState(Protocol):
    """What a pod summary reads of a pod: a Pod, or a selectors.PodState row."""

    @property
    def attempt(self) -> int: ...

    @property
    def status(self) -> str: ...


P = TypeVar("P", bound=PodState)


@overload
def current_pods(workload: Workload) -> list[Pod]: ...


@overload
def current_pods(workload: Workload, pods: Sequence[P] | None) -> list[P]: ...


def current_pods(workload: Workload, pods: Sequence[Any] | None = None) -> list[Any]:
    """The pods of the latest attempt (a requeued job keeps its preempted pods until resumed);
    `pods` when the caller read them, else the workload's prefetched pods."""
    found: list[Any] = list(workload.pods.all()) if pods is None else list(pods)
    if not found:
        return []
    if workload.kind == Kind.INFERENCE:
        return [p for p in found if p.status in (PodStatus.PENDING, PodStatus.RUNNING)]
    latest = max(p.attempt for p in found)
    return [p for p in found if p.attempt == latest]


def pod_summary(pods: Sequence[PodState]) -> list[tuple[str, int]]:
    """(status, count) of some pods, in the order PodStatus lists them."""
    counts = Counter(p.status for p in pods)
    return [(s, counts[s]) for s in PodStatus.values if counts[s]]


@dataclass(frozen=True)
class PodLine:
    """A pod as the pods table shows it to one user."""

    name: str
    node: str  # "" before placement
    node_hidden: bool  # borrowed, and the user may not see its node
    borrowed: bool
    status: str
    reason: str


@dataclass(frozen=True)
class EventLine:
    """A timeline entry as one user reads it."""

    at: datetime
    kind: str
    message: str
    nodes: str  # for platform admins: the nodes of a borrowed entry, its message names none


class Readable:
    """What one user may read of a workload's pods and timeline (see jobs.visibility).

    Its pods must be prefetched with their nodes.
    """

    def __init__(self, workload: Workload, user: Any) -> None:
        self.admin = sees_borrowed_nodes(user)
        pods = workload.pods.all()
        self.hidden: set[str] = (
            set()
            if self.admin
            else hidden_nodes((p.borrowed, p.node.name if p.node else None) for p in pods)
        )

    def text(self, text: str) -> str:
        """A text about the workload (its status reason), without nodes the user may not see."""
        return scrub(text, self.hidden)

    def pods(self, pods: list[Pod]) -> list[PodLine]:
        """Pods for the table."""
        return [
            PodLine(
                name=p.name,
                node=p.node.name if p.node else "",
                node_hidden=p.borrowed and not self.admin,
                borrowed=p.borrowed,
                status=p.status,
                reason=self.text(p.reason),
            )
            for p in pods
        ]

    def events(self, events: list[WorkloadEvent]) -> list[EventLine]:
        """Timeline entries, in the order given."""
        lines = []
        for e in events:
            data = e.data or {}
            if self.admin:
                nodes = ", ".join(entry_nodes(data)) if data.get(BORROWED) else ""
                lines.append(EventLine(e.at, e.kind, e.message, nodes))
            else:
                lines.append(EventLine(e.at, e.kind, self.text(e.message), ""))
        return lines


@dataclass(frozen=True)
class Row:
    """A workload as one list row shows it (computed once, no queries)."""

    workload: Workload
    age: str
    progress: int | None
    quota_label: str
    pods: list[tuple[str, int]]
    time_left: str
    restarts: str  # "restarted 4 times: 1 fault of 3 allowed, 3 preemptions"


def time_left(workload: Workload, now: datetime) -> str:
    """An interactive instance's remaining time before its maximum duration stops it."""
    if workload.max_duration is None:
        return ""
    if workload.started_at is None:
        return age(workload.max_duration)
    if workload.ended_at is not None:
        return "—"
    return age(workload.max_duration - (now - workload.started_at).total_seconds())


def row(workload: Workload, now: datetime, pods: Sequence[PodState] | None = None) -> Row:
    """Present one workload; its pods must be prefetched, or given as `pods`."""
    training = workload.kind == Kind.TRAINING
    return Row(
        workload=workload,
        age=age((now - workload.submitted_at).total_seconds()),
        progress=(
            percent(workload.progress, workload.total_work, workload.status) if training else None
        ),
        quota_label=quota_label(workload.in_quota, workload.status),
        pods=pod_summary(current_pods(workload, pods)),
        time_left=time_left(workload, now),
        restarts=restarts_text(workload.restarts, workload.failures, workload.max_restarts),
    )


def _ago(at: datetime | None, now: datetime, none: str) -> str:
    """'12m ago', or `none` when there is no time."""
    return none if at is None else f"{age((now - at).total_seconds())} ago"


def _rules(codes: list[int], patterns: list[str]) -> str:
    """'exit codes 137, 143 or a message matching 'NCCL'', 'nothing' when both are empty."""
    parts = []
    if codes:
        parts.append(f"exit code{'s' if len(codes) > 1 else ''} {', '.join(map(str, codes))}")
    if patterns:
        parts.append("a message matching " + " or ".join(repr(p) for p in patterns))
    return " or ".join(parts) or "nothing"


def signal_facts(workload: Workload, pods: Sequence[Pod], now: datetime) -> dict[str, str]:
    """What a workload's reports said last: heartbeat and checkpoint (training), activity
    (instances), and the failure policy, as the page shows them."""
    beats = [p.last_heartbeat_at for p in pods if p.last_heartbeat_at is not None]
    checkpoint = NO_CHECKPOINT
    if workload.checkpoint_label:
        when = _ago(workload.last_checkpoint_at, now, "time unknown")
        checkpoint = f"{workload.checkpoint_label}, {when}"
    policy = str(FailurePolicy.ANY.label)  # the fault tolerance line says whether it restarts
    if workload.failure_policy == FailurePolicy.EXIT_CODE_AND_ERROR_MSG:
        retry = _rules(workload.retry_exit_codes, workload.retry_messages)
        fail = _rules(workload.fail_exit_codes, workload.fail_messages)
        policy = (
            f"ExitCodeAndErrorMsg: retry {retry}; fail at once on {fail}; "
            "any other failure fails the job"
        )
    return {
        "heartbeat": _ago(max(beats, default=None), now, "none reported"),
        "checkpoint": checkpoint,
        "activity": _ago(workload.last_activity_at, now, "none reported (idle since its start)"),
        "policy": policy,
    }


def now() -> datetime:
    """The control loop's clock (simulated in the demo), so ages match the events."""
    return clock.now()


def refuse(form: forms.BaseForm, error: DomainError, aliases: dict[str, str] | None = None) -> None:
    """Show a service's refusal on the field it names, or above the form."""
    field = (aliases or {}).get(error.field or "", error.field)
    form.add_error(field if field in form.fields else None, error.message)


class SubmitView(WorkspacePageMixin, FormView):  # type: ignore[type-arg]
    """A form that creates a workload in a quota the user's Resource Usage rules allow.

    Subclasses say how to create (`create`) and where to go next (`done`); a refusal goes
    back on the field it names.
    """

    permission = SUBMIT
    verb = "Submitted"

    def get_form_kwargs(self) -> dict[str, Any]:
        """Only the usable quotas, with their caps."""
        kwargs = super().get_form_kwargs()
        kwargs["usable"] = self.access.usable_quotas(self.workspace)
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The workspace tabs around the form."""
        context = super().get_context_data(**kwargs)
        context.update(self.workspace_context())
        return context

    def create(self, form: Any) -> Workload:
        """Call the service that creates this kind of workload."""
        raise NotImplementedError

    def done(self, workload: Workload) -> HttpResponse:
        """Where to go after creating."""
        raise NotImplementedError

    def form_valid(self, form: Any) -> HttpResponse:
        """Create through the service; a refusal goes back on the field it names."""
        try:
            workload = self.create(form)
        except DomainError as error:
            refuse(form, error, form.ALIASES)
            return self.form_invalid(form)
        messages.success(self.request, f"{self.verb} {workload.name}.")
        return self.done(workload)
