"""Benchmarks that print JSON; run each as a script (`python bench/NAME.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ../shared beside the checkout; a git worktree sits one level deeper (wt/NAME).
OPENB_TRACES = next(
    (t for t in (p / "shared" / "traces" / "openb" for p in REPO.parents) if t.exists()),
    REPO.parent / "shared" / "traces" / "openb",
)


def p95(samples: Sequence[float]) -> float:
    """The 95th percentile by nearest rank: the least sample at or above 95% of them."""
    ordered = sorted(samples)
    return ordered[max(0, (95 * len(ordered) + 99) // 100 - 1)]
