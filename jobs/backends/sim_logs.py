"""What a simulated replica would have printed, derived from its pod and workload rows.

Nothing is stored: the lines are a pure function of the rows and the cluster clock, so every
reader gets the same ones. Training prints its steps with a falling loss, a line at each
checkpoint and, when it ends, why (an injected crash's message); inference prints what it
served each minute; an interactive instance prints Jupyter's start-up lines. No line names a
node (members may not learn which node a borrowed replica ran on: jobs.visibility).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobs.backends.log_lines import LogsUnavailable, log_line
from jobs.choices import Kind, PodStatus

if TYPE_CHECKING:
    from jobs.models import Pod, Workload

STEP_SECONDS = 30  # a training step line every 30 s of cluster time
SERVE_SECONDS = 60  # an inference summary each minute
SAVE_SECONDS = 300  # a notebook may save its file every five minutes

Stamped = tuple[datetime, str]
Maker = Callable[["Pod", "Workload", "_Window"], list[Stamped]]


def _noise(*parts: object) -> float:
    """A fixed number in [0, 1) for these parts: the same replica prints the same lines."""
    return (zlib.crc32(":".join(map(str, parts)).encode()) % 10_000) / 10_000


@dataclass(frozen=True)
class _Window:
    """The span of one replica's life whose lines are wanted: (`low`, `end`]."""

    start: datetime
    end: datetime
    low: datetime

    def ticks(self, every: int) -> Iterator[tuple[int, datetime]]:
        """(k, start + k·every) for k ≥ 1 inside the window."""
        first = max(1, math.floor((self.low - self.start).total_seconds() / every))
        k = first
        while (at := self.start + timedelta(seconds=k * every)) <= self.end:
            if at > self.low:
                yield k, at
            k += 1


def pod_log(pod: Pod, *, tail: int, since: datetime | None, now: datetime) -> list[str]:
    """The last `tail` lines the replica printed after `since`, as of `now`."""
    if pod.started_at is None:
        if pod.status in (PodStatus.PENDING, PodStatus.RUNNING):
            raise LogsUnavailable(f"{pod.name} has not started yet: its container is starting.")
        raise LogsUnavailable(f"{pod.name} never started, so it printed nothing.")
    start = pod.started_at
    end = min(pod.ended_at or now, now)
    if end < start:
        return []
    workload = pod.workload
    make, every = KINDS[Kind(workload.kind)]
    # Only the lines that can be among the last `tail` are made: each tick makes one, until
    # an instance's last activity.
    last = end
    if workload.kind == Kind.INTERACTIVE:
        last = max(start, min(end, workload.last_activity_at or start))
    recent = last - timedelta(seconds=(tail + 3) * every)
    window = _Window(start, end, max(start, since or start, recent))
    made = make(pod, workload, window)
    stamped = sorted(made, key=lambda line: line[0])
    # Cut before formatting: only the lines answered are written out.
    answered = [line for line in stamped if since is None or line[0] > since][-tail:]
    return [log_line(at, text) for at, text in answered]


def _start(window: _Window, lines: list[str]) -> list[Stamped]:
    """Start-up lines, one a second from the replica's start, if inside the window."""
    at = [window.start + timedelta(seconds=1 + i) for i in range(len(lines))]
    return [(t, text) for t, text in zip(at, lines, strict=True) if window.low < t <= window.end]


def _ends_inside(pod: Pod, window: _Window) -> bool:
    """The replica ended inside the window."""
    return pod.ended_at is not None and window.low < pod.ended_at <= window.end


def _ending(pod: Pod, window: _Window, prefix: str) -> list[Stamped]:
    """What the replica printed as it ended, by how it ended."""
    if not _ends_inside(pod, window):
        return []
    if pod.status == PodStatus.FAILED:
        lines = [f"{prefix}ERROR {pod.message or pod.reason or 'the process died'}"]
        if pod.exit_code is not None:  # a lost node's process prints nothing more
            lines.append(f"{prefix}process exited; exit code {pod.exit_code}")
    elif pod.status == PodStatus.PREEMPTED:
        lines = [f"{prefix}received SIGTERM: the replica was preempted; stopping"]
    elif pod.status == PodStatus.STOPPED:
        lines = [f"{prefix}received SIGTERM; shutting down"]
    else:
        return []
    return [(window.end, line) for line in lines]


def _training(pod: Pod, workload: Workload, window: _Window) -> list[Stamped]:
    """Steps with a falling loss, checkpoints at the checkpoint times, then the ending."""
    rank = f"[rank {pod.index}] "
    base = int(pod.resume_from) if pod.resume_from.isdigit() else 0
    resume = (
        f"resuming from checkpoint {pod.resume_from}"
        if pod.resume_from
        else "no checkpoint to resume from: starting at step 0"
    )
    lines = _start(
        window,
        [
            f"{rank}world size {workload.replicas}, {workload.gpu / 1000:g} GPU(s) per rank",
            f"{rank}{resume}",
        ],
    )

    def step(at: datetime) -> int:
        return base + int((at - window.start).total_seconds() // STEP_SECONDS)

    seed = workload.pk
    for k, at in window.ticks(STEP_SECONDS):
        n = base + k
        loss = 0.35 + 2.2 * math.exp(-n / 400) + 0.05 * _noise(seed, pod.index, n)
        lines.append((at, f"{rank}step {n} loss {loss:.4f}"))
    lines += [
        (at, f"{rank}checkpoint saved: step {step(at)}") for at in _checkpoints(workload, window)
    ]
    if pod.status == PodStatus.SUCCEEDED and _ends_inside(pod, window):
        n = step(window.end)
        lines += [
            (window.end, f"{rank}checkpoint saved: step {n}"),
            (window.end, f"{rank}training complete after step {n}"),
        ]
    return lines + _ending(pod, window, rank)


def _checkpoints(workload: Workload, window: _Window) -> list[datetime]:
    """The checkpoint times inside the window: every interval, through the job's last one."""
    interval = timedelta(seconds=max(workload.checkpoint_interval, 1))
    last = workload.last_checkpoint_at
    anchor = last if last is not None and window.start <= last <= window.end else window.start
    k = math.ceil((window.low - anchor) / interval)
    times = []
    while (at := anchor + k * interval) <= window.end:
        if at > window.low:
            times.append(at)
        k += 1
    return times


def _inference(pod: Pod, workload: Workload, window: _Window) -> list[Stamped]:
    """Model loading, then a summary of the requests served each minute."""
    lines = _start(
        window,
        [
            f"loading model weights from {workload.image or 'the model store'}",
            f"model loaded; serving replica {pod.index} on port 8080",
        ],
    )
    for k, at in window.ticks(SERVE_SECONDS):
        load = _noise(workload.pk, pod.index, k)
        p50 = 40 + 60 * load
        lines.append(
            (at, f"served {int(600 + 2400 * load)} requests in the last minute; p50 {p50:.0f} ms")
        )
    return lines + _ending(pod, window, "")


def _interactive(pod: Pod, workload: Workload, window: _Window) -> list[Stamped]:
    """Jupyter's start-up lines, then a notebook saved while someone works in it.

    Saves stop at the instance's last activity: an abandoned notebook prints nothing more.
    """
    lines = _start(
        window,
        [
            "[I ServerApp] Jupyter Server 2.14.2 is running at:",
            f"[I ServerApp] http://{pod.name}:8888/lab",
            "[I ServerApp] Use Control-C to stop this server and shut down all kernels.",
        ],
    )
    save = "[I ServerApp] Saving file at /work/Untitled.ipynb"
    active = workload.last_activity_at
    if active is not None and window.low < active <= window.end:
        lines.append((active, save))
    for _, at in window.ticks(SAVE_SECONDS):
        if active is None or at >= active:
            break
        lines.append((at, save))
    return lines + _ending(pod, window, "[C ServerApp] ")


# Per kind: its lines, and the seconds between two of its ticks.
KINDS: dict[Kind, tuple[Maker, int]] = {
    Kind.TRAINING: (_training, STEP_SECONDS),
    Kind.INFERENCE: (_inference, SERVE_SECONDS),
    Kind.INTERACTIVE: (_interactive, SAVE_SECONDS),
}
