"""Which owned pods this database may delete: only those it knows it no longer wants.

A pod carries this database's instance id (chosen at install time, jobs migration 0009) and
the replica it runs. It is deleted only when a pod row of this database stands for it (same
workload, index, attempt and row id) and that row no longer wants it; a pod with our labels
that no row stands for (a restored or emptied database, a copy by hand) is left alone and
logged, and at most `max_deletes` pods go per sync.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client import Gauge

if TYPE_CHECKING:
    from jobs.backends.kubernetes.manifest import Key

log = logging.getLogger(__name__)

UNKNOWN_PODS = Gauge(
    "tidepool_k8s_unknown_owned_pods",
    "Pods labelled with this database's instance id that no pod row stands for (left alone).",
    multiprocess_mode="livemax",
)


def database_instance() -> str:
    """This database's instance id (created by migration 0009; made here if it is missing)."""
    from jobs.models import ClusterInstance

    row = ClusterInstance.objects.order_by("pk").first()
    if row is None:
        row, _ = ClusterInstance.objects.get_or_create(
            pk=1, defaults={"instance": f"tp-{secrets.token_hex(5)}"}
        )
    return row.instance


@dataclass(frozen=True)
class Row:
    """What the database knows of one replica attempt."""

    pk: int
    live: bool
    ended_at: datetime | None


def rows_for(keys: Iterable[Key]) -> dict[Key, Row]:
    """The pod rows standing for these replica attempts (one query)."""
    from jobs.choices import ACTIVE_STATUSES, LIVE_POD_STATUSES
    from jobs.models import Pod

    keys = set(keys)
    found: dict[Key, Row] = {}
    if not keys:
        return found
    rows = Pod.objects.filter(workload_id__in={k[0] for k in keys}).values_list(
        "workload_id", "index", "attempt", "pk", "status", "ended_at", "workload__status"
    )
    for workload, index, attempt, pk, status, ended_at, workload_status in rows:
        k = (workload, index, attempt)
        if k in keys:
            live = status in LIVE_POD_STATUSES and workload_status in ACTIVE_STATUSES
            found[k] = Row(pk, live, ended_at)
    return found


class Budget:
    """At most `limit` deletions in one sync; the rest wait for the next."""

    def __init__(self, limit: int) -> None:
        self.left, self.skipped = limit, 0

    def take(self) -> bool:
        """Whether one more pod may be deleted in this sync."""
        if self.left <= 0:
            self.skipped += 1
            return False
        self.left -= 1
        return True

    def report(self) -> None:
        """Log the deletions left for later."""
        if self.skipped:
            log.warning(
                "Deleted the most pods one sync may (TIDEPOOL_K8S_MAX_DELETES); %d more wait "
                "for the next sync.",
                self.skipped,
            )


def report_unknown(unknown: list[str], *, rows_exist: bool) -> None:
    """Say which owned pods no row stands for, and why nothing deletes them."""
    UNKNOWN_PODS.set(len(unknown))
    if not unknown:
        return
    shown = ", ".join(sorted(unknown)[:10])
    if not rows_exist:
        log.error(
            "This database has no pod rows, yet %d pods carry its instance id (%s...): it may "
            "be empty or restored from an old backup. Tidepool deletes none of them; check "
            "TIDEPOOL_K8S_INSTANCE and delete them by hand if they are stale.",
            len(unknown),
            shown,
        )
    else:
        log.warning(
            "%d pods carry this database's instance id but no pod row stands for them (%s); "
            "left alone.",
            len(unknown),
            shown,
        )
