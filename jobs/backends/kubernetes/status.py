"""What an API pod object says happened: its phase, exit code, reason and termination message,
as Tidepool names them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobs.choices import PodStatus

# Waiting reasons the kubelet never gets out of by itself: the replica has failed.
STUCK = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
    }
)
# Pod reasons that mean the node went away: lost by the node controller, or shut down (the
# kubelet's graceful node shutdown says "Terminated", older kubelets "Shutdown").
NODE_GONE = frozenset({"NodeLost", "Terminated", "Shutdown"})
# Reasons the kubelet gives when it refuses a pod at admission (besides `OutOf<resource>`):
# the node, not the application, said no, so the replica belongs on another node.
ADMISSION_REFUSALS = frozenset(
    {"UnexpectedAdmissionError", "TaintToleration", "NodeAffinity", "NodeName", "NodePorts"}
)
# Long enough to read, short enough for the replica's and the workload's reason columns.
REASON_CHARS = 160


@dataclass(frozen=True)
class Observed:
    """One pod's state as Tidepool names it."""

    phase: str
    exit_code: int | None = None
    reason: str = ""
    node_lost: bool = False
    message: str = ""  # the container's termination message (terminationMessagePath)
    rejected: bool = False  # refused by the kubelet before any container ran


def clip(text: str) -> str:
    """A reason that fits the replica's and the workload's reason columns."""
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _container_states(status: dict[str, Any], state: str) -> list[dict[str, Any]]:
    """The containers' `state.<state>` entries (terminated, waiting), in order."""
    return [
        c["state"][state]
        for c in status.get("containerStatuses") or []
        if (c.get("state") or {}).get(state)
    ]


def _terminated(status: dict[str, Any]) -> dict[str, Any] | None:
    """The container termination that explains the pod's end: a failing one first."""
    ended = _container_states(status, "terminated")
    failing = [t for t in ended if t.get("exitCode")]
    candidates = failing or ended
    return candidates[0] if candidates else None


def _node_lost(status: dict[str, Any]) -> bool:
    """The pod ended with its node: unreachable, not ready, or shutting down."""
    if status.get("reason") in NODE_GONE:
        return True
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == "DeletionByTaintManager"
        for c in status.get("conditions") or []
    )


def observe_pod(obj: dict[str, Any]) -> Observed:
    """Map an API pod to Pending, Running, Succeeded or Failed with an exit code and reason."""
    status = obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    message = status.get("message") or ""
    if _node_lost(status):
        return Observed(
            PodStatus.FAILED, reason=clip(f"Node lost. {message}".strip()), node_lost=True
        )
    term = _terminated(status)
    code = term.get("exitCode") if term else None
    if phase == "Succeeded":
        return Observed(PodStatus.SUCCEEDED, exit_code=code if code is not None else 0)
    if phase == "Failed":
        said = (term.get("message") or "") if term else ""
        why = clip(_failure(status, term))
        return Observed(
            PodStatus.FAILED, exit_code=code, reason=why, message=said, rejected=rejected(status)
        )
    if phase == "Running":
        return Observed(PodStatus.RUNNING)
    for waiting in _container_states(status, "waiting"):
        if waiting.get("reason") in STUCK:
            why = f"{waiting['reason']}: {waiting.get('message') or 'the container cannot start'}"
            return Observed(PodStatus.FAILED, reason=clip(why))
    return Observed(PodStatus.PENDING)


def _failure(status: dict[str, Any], term: dict[str, Any] | None) -> str:
    """Why a Failed pod failed, in the words a user searches for (OOMKilled, Evicted)."""
    pod_reason = status.get("reason") or ""
    message = status.get("message") or ""
    if pod_reason == "Evicted":
        return f"Evicted: {message or 'the node ran short of a resource'}"
    if term is not None:
        why, code = term.get("reason") or "Error", term.get("exitCode")
        if why == "OOMKilled":
            return f"OOMKilled: out of memory (exit code {code})"
        detail = f": {term['message']}" if term.get("message") else ""
        return f"{why} (exit code {code}){detail}"
    # Refused by the kubelet before any container ran (e.g. OutOfnvidia.com/gpu).
    return f"{pod_reason or 'Failed'}: {message}" if message else pod_reason or "Failed"


def rejected(status: dict[str, Any]) -> bool:
    """The kubelet refused the pod at admission (out of a resource, an untolerated NoExecute
    taint, affinity, a device plugin error, or an eviction before any container started)."""
    reason = status.get("reason") or ""
    if not (reason.startswith("OutOf") or reason in ADMISSION_REFUSALS or reason == "Evicted"):
        return False
    return not any(
        {"running", "terminated"} & set(c.get("state") or {})
        for c in status.get("containerStatuses") or []
    )


# DisruptionTarget reasons: the pod was ended from outside (a drain, a preemption by
# kube-scheduler, the kubelet's node shutdown, PodGC of a deleted node, the taint manager),
# not by its application.
DISRUPTIONS = frozenset(
    {
        "EvictionByEvictionAPI",
        "PreemptionByScheduler",
        "PreemptionByKubeScheduler",
        "TerminationByKubelet",
        "DeletionByPodGC",
        "DeletionByTaintManager",
    }
)


def disruption(obj: dict[str, Any]) -> str:
    """Why the pod was disrupted ("" if it was not), from its DisruptionTarget condition."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        target = c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        if target and c.get("reason") in DISRUPTIONS:
            return clip(f"{c['reason']}: {c.get('message') or 'disrupted'}")
    return ""


def stuck(obj: dict[str, Any]) -> str:
    """The waiting reason of a container that cannot start by itself ("" if none)."""
    for waiting in _container_states(obj.get("status") or {}, "waiting"):
        if waiting.get("reason") in STUCK:
            return str(waiting["reason"])
    return ""
