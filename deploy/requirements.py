"""Print the pip requirements the Dockerfile installs, read from pyproject.toml.

    python deploy/requirements.py runtime   # the project's dependencies
    python deploy/requirements.py core      # what compiles the core (mypyc, setuptools)

The image installs the dependencies, not the project: Tidepool runs from its source tree
(/app), where the compiled core (build/core), templates and static files sit beside it.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requirements(kind: str, pyproject: Path = PYPROJECT) -> list[str]:
    """The requirement lines for `runtime` or `core`."""
    data = tomllib.loads(pyproject.read_text())
    if kind == "runtime":
        return list(data["project"]["dependencies"])
    if kind == "core":
        # The same mypy as the test tools pin (mypyc ships with it), and the build backend.
        test = data["project"]["optional-dependencies"]["test"]
        mypy = [r for r in test if r.split("==")[0].strip() == "mypy"]
        if len(mypy) != 1:
            raise SystemExit("pyproject.toml's test extras must pin mypy exactly once")
        return [*mypy, *data["build-system"]["requires"]]
    raise SystemExit(f"unknown kind {kind!r}: runtime or core")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print("\n".join(requirements(sys.argv[1])))
