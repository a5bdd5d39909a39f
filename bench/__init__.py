"""Benchmarks that print JSON; run each as a script (`python bench/NAME.py`)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ../shared beside the checkout; a git worktree sits one level deeper (wt/NAME).
OPENB_TRACES = next(
    (t for t in (p / "shared" / "traces" / "openb" for p in REPO.parents) if t.exists()),
    REPO.parent / "shared" / "traces" / "openb",
)
