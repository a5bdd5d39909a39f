"""Reads for what-if replays: the list, one replay, and the names a change may refer to."""

from __future__ import annotations

from django.db.models import QuerySet

from cluster.models import NodePool
from jobs.bridge.snapshot import core_name
from jobs.choices import ENDED_STATUSES, Kind
from jobs.models import Workload
from quotas.models import Quota
from whatif.changes import Names
from whatif.models import WhatIf


def whatif_list() -> QuerySet[WhatIf]:
    """Every replay, newest first, without the (large) results."""
    return WhatIf.objects.select_related("created_by").defer("result")


def change_names() -> Names:
    """The quotas, node pools and live services a proposed change may name (3 queries)."""
    quotas = dict(Quota.objects.values_list("name", "parent__name"))
    services = Workload.objects.filter(kind=Kind.INFERENCE).exclude(status__in=ENDED_STATUSES)
    return Names(
        quotas=set(quotas),
        pools=set(NodePool.objects.values_list("name", flat=True)),
        services={core_name(s) for s in services.select_related("workspace")},
        siblings=quotas,
    )
