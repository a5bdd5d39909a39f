"""Benchmarks that print JSON; run each as a script (`python bench/NAME.py`)."""

from __future__ import annotations

import sys
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


# The venv's editable install of /work/main would lend another checkout the modules it lacks
# (an older one has no jobs.templatetags): a bench serving two checkouts drops that finder.
_OWN_MODULES = (
    "import sys; sys.path.insert(0, '.'); sys.meta_path[:] = [f for f in sys.meta_path "
    "if not getattr(f, '__module__', '').startswith('__editable__')]; "
)


def isolated(script: str, *args: str) -> list[str]:
    """The command running `script` from the working directory's checkout's modules only."""
    run = "import runpy; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    return [sys.executable, "-c", _OWN_MODULES + run, script, *args]


def isolated_code(code: str, *args: str) -> list[str]:
    """The command running `code` (python -c) from the working directory's checkout's modules."""
    return [sys.executable, "-c", _OWN_MODULES + code, *args]
