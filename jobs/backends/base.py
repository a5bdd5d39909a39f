"""What the control loop needs from a cluster: start pods, stop pods, report what happened."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jobs.models import Pod


# How a node's refusal of a pod begins (PodReport.rejected): the pod rows' reasons are
# counted by it to bound the attempts (jobs.services.rejections).
NODE_REFUSAL = "Refused by node"


@dataclass(frozen=True)
class PodReport:
    """An observed change of one pod: now Running, Succeeded or Failed (with why)."""

    pod_id: int
    phase: str
    exit_code: int | None = None
    reason: str = ""
    node_lost: bool = False
    # The container's termination message (Kubernetes) or the injected fault's (simulated),
    # which an ExitCodeAndErrorMsg policy matches with the exit code.
    message: str = ""
    # The cluster will never run this replica as asked (no image, an inexpressible request):
    # restarting cannot help, so the workload fails at once.
    refused: bool = False
    # The node refused the pod before it ran (a kubelet admission rejection, or a node that
    # became ineligible just before its pod was created): placed again elsewhere, uncharged.
    rejected: bool = False
    # Ended from outside (a drain, a kube-scheduler preemption, a kubelet shutdown, PodGC, a
    # pod stuck terminating): not the application's failure, so no failure is charged.
    disrupted: bool = False


class Backend(Protocol):
    """A cluster the control loop drives; it never touches a pod it does not own."""

    def create_pod(self, pod: Pod, *, now: datetime) -> None:
        """Start a replica on the node the scheduler chose."""
        ...

    def delete_pod(self, pod: Pod, *, grace_seconds: int) -> None:
        """Stop a replica, giving it time to checkpoint."""
        ...

    def refresh(self, *, now: datetime) -> None:
        """Catch up with the cluster before the write lock is taken (network round trips)."""
        ...

    def observe(self, *, now: datetime) -> list[PodReport]:
        """Pods whose phase changed since the last call; runs under the write lock."""
        ...

    def instance_url(self, pod: Pod) -> str | None:
        """Where a user opens a running interactive instance's pod; None when nowhere."""
        ...

    def logs(self, pod: Pod, *, tail: int, since: datetime | None, now: datetime) -> list[str]:
        """The replica's last `tail` log lines written after `since` (jobs.backends.log_lines).

        Raises LogsUnavailable, with a line for the user, when there is nothing to read.
        """
        ...
