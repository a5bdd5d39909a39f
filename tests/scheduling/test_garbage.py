"""A cycle's working state holds no reference cycles: a long-running worker frees it as soon as
the cycle returns, and the cyclic garbage collector never has to walk it."""

from __future__ import annotations

import gc
from collections import Counter

from hypothesis import HealthCheck, given, settings

from jobs.scheduling.cycle import run_cycle
from jobs.scheduling.types import Snapshot

from .test_properties import clusters


def cyclic_garbage(snap: Snapshot) -> Counter[str]:
    """The types of the objects a cycle leaves that only the cyclic collector could free."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.garbage.clear()
        run_cycle(snap)
        gc.collect()
        return Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=clusters())
def test_no_cycle_leaves_cyclic_garbage(snap: Snapshot) -> None:
    assert cyclic_garbage(snap) == Counter()
