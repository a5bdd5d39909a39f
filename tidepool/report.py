"""Tell Tidepool how a running replica is doing: progress, checkpoints, heartbeats, activity.

Standard library only. Inside a Tidepool workload the pod's environment names the endpoint
and this attempt's token (TIDEPOOL_REPORT_URL, TIDEPOOL_REPORT_TOKEN); outside one every call
does nothing, so the same script runs on a laptop. A report that cannot be sent (network,
console down, a refused value) is logged, once as a warning and then at debug level, and
never raises into the training code.

    from tidepool import report

    start = int(report.resume_from() or 0)
    with report.heartbeats(every=30):
        for step in range(start, steps):
            train_one_step()
            report.progress(step / steps)
            if step % 1000 == 0:
                save_checkpoint(step)
                report.checkpoint(step)
"""

from __future__ import annotations

import json
import logging
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)
TIMEOUT = 5.0  # seconds a report may take before it is given up
_failed = threading.Event()  # set after the first failure, which alone is a warning


def enabled() -> bool:
    """Whether this process runs in a Tidepool workload that can report."""
    return bool(os.environ.get("TIDEPOOL_REPORT_URL") and os.environ.get("TIDEPOOL_REPORT_TOKEN"))


def resume_from() -> str | None:
    """The checkpoint label this attempt should resume from (TIDEPOOL_RESUME_FROM), or None."""
    return os.environ.get("TIDEPOOL_RESUME_FROM") or None


def _send(**fields: object) -> bool:
    """POST one report; whether the console took it (False outside Tidepool)."""
    url, token = os.environ.get("TIDEPOOL_REPORT_URL"), os.environ.get("TIDEPOOL_REPORT_TOKEN")
    if not url or not token:
        return False
    request = urllib.request.Request(
        url,
        data=json.dumps(fields).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            response.read()
        return True
    except urllib.error.HTTPError as e:  # the console answered, and refused
        _complain(f"Tidepool refused the report {fields}: {e.code} {e.read()[:300]!r}")
    except (OSError, ValueError) as e:  # unreachable, timed out, a malformed URL
        _complain(f"Tidepool report to {url} failed: {e}")
    return False


def _complain(message: str) -> None:
    """Log a failed report: the first as a warning, the rest at debug level."""
    if _failed.is_set():
        log.debug(message)
    else:
        _failed.set()
        log.warning("%s (further failures are logged at debug level)", message)


def progress(fraction: float) -> bool:
    """Report how far the work is, from 0 to 1 (it counts as a heartbeat too)."""
    return _send(progress=fraction)


def checkpoint(label: str | int) -> bool:
    """Report a checkpoint just saved; a restarted attempt gets `label` as resume_from()."""
    return _send(checkpoint=label)


def heartbeat() -> bool:
    """Report that this replica is alive (hang detection counts from the last one)."""
    return _send(heartbeat=True)


def activity() -> bool:
    """Report that someone is using this interactive instance (idle stop counts from it)."""
    return _send(activity=True)


@contextmanager
def heartbeats(every: float = 30.0) -> Iterator[None]:
    """Send a heartbeat now and every `every` seconds from a daemon thread, until the block ends."""
    if not enabled():
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while True:
            heartbeat()
            if stop.wait(every):
                return

    thread = threading.Thread(target=beat, name="tidepool-heartbeats", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
