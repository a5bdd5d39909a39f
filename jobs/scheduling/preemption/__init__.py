"""The four kinds of preemption, tried in this order, each behind the PreemptionKind interface."""

from __future__ import annotations

from .base import Attempt, PreemptionKind, search
from .child import ChildPreemption
from .fair_share import FairShareReclaim
from .priority import PriorityPreemption
from .reclaim import Reclaim

KINDS: tuple[PreemptionKind, ...] = (
    Reclaim(),
    ChildPreemption(),
    PriorityPreemption(),
    FairShareReclaim(),
)

__all__ = ["KINDS", "Attempt", "PreemptionKind", "search"]
