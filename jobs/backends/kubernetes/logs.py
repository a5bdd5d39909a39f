"""A replica's log through `read_namespaced_pod_log`, and a line for the user when there is none.

The API server reads the log from the kubelet: a pod whose container has not started answers
400 ("is waiting to start"), a pod that is gone 404, and the network may fail on the way. Each
becomes a LogsUnavailable with words the page, the API and the CLI show, never a 500.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobs.backends.kubernetes.config import KubeConfig
from jobs.backends.kubernetes.errors import ApiError
from jobs.backends.kubernetes.manifest import Refused, namespace_for
from jobs.backends.log_lines import LogsUnavailable, lines_after
from jobs.choices import PodStatus

if TYPE_CHECKING:
    from jobs.backends.kubernetes.api import Api
    from jobs.models import Pod

CONTAINER = "main"  # the one container of a replica's pod (manifest.pod_body)


def pod_log(
    api: Api, kube: KubeConfig, pod: Pod, *, tail: int, since: datetime | None
) -> list[str]:
    """The last `tail` lines of the pod's container written after `since`, timestamped."""
    try:
        namespace = namespace_for(pod.workload.workspace.name, kube)
    except Refused as e:
        raise LogsUnavailable(f"No logs: {e}") from None
    # sinceSeconds counts back from the API server's clock (wall time), a second wider than
    # asked; the lines are then cut at `since` exactly by their timestamps.
    seconds = None
    if since is not None:
        seconds = max(1, math.ceil((datetime.now(UTC) - since).total_seconds()) + 1)
    try:
        # Raw (Api.call): the client would otherwise try to parse the text as a model.
        response: Any = api.call(
            "read_namespaced_pod_log",
            pod.name,
            namespace,
            container=CONTAINER,
            tail_lines=tail,
            since_seconds=seconds,
            timestamps=True,
        )
        text = response.data.decode("utf-8", errors="replace")
    except ApiError as e:
        if e.status == 0:
            raise LogsUnavailable(
                f"Could not reach the cluster to read {pod.name}'s log; try again shortly."
            ) from None
        raise LogsUnavailable(_refusal(pod, e)) from None
    return lines_after(text.splitlines(), since, tail)


def _refusal(pod: Pod, e: ApiError) -> str:
    """Why the API server gave no log, for the user."""
    if e.status == 404:
        if pod.status == PodStatus.PENDING:
            return f"{pod.name} has not been created in the cluster yet."
        return f"{pod.name} is gone from the cluster, and its log went with it."
    if e.status == 400 and pod.status in (PodStatus.PENDING, PodStatus.RUNNING):
        return f"{pod.name} has not started yet: {e.message}"
    return f"The cluster gave no log for {pod.name}: {e.message}"
