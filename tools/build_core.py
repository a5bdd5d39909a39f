"""Compile the scheduling core with mypyc into build/core; `make core` runs it.

The compiled modules and the shared runtime library `jobs.scheduling._core__mypyc` land in
build/core/jobs/scheduling/, C sources and objects in build/core-c/. The stamp is written last,
so a failed build leaves none and the package keeps loading its pure-Python modules.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import jobs.scheduling._loader as core  # noqa: E402

C_DIR = REPO / "build" / "core-c"
# The core is strict-typed on its own; the project's mypy config would load the Django plugin.
MYPY_CONFIG = "[mypy]\npython_version = 3.11\nstrict = True\n"


def main() -> int:
    """Build unless the stamp already matches the sources; exit 1 if compilation fails."""
    if core.pure_forced():
        print("core: not compiled, TIDEPOOL_PURE_CORE is set")
        return 0
    digest = core.sources_digest()
    if core.STAMP.exists() and core.STAMP.read_text().strip() == digest:
        print(f"core: compiled core is up to date in {core.BUILD.relative_to(REPO)}")
        return 0
    from mypyc.build import mypycify
    from setuptools import setup

    shutil.rmtree(core.BUILD, ignore_errors=True)
    C_DIR.mkdir(parents=True, exist_ok=True)
    config = C_DIR / "mypy.ini"
    config.write_text(MYPY_CONFIG)
    sources = [str(p.relative_to(REPO)) for p in core.compiled_sources()]
    t0 = time.perf_counter()
    os.chdir(REPO)
    extensions = mypycify(
        ["--config-file", str(config), "--cache-dir", str(C_DIR / "mypy_cache"), *sources],
        target_dir=str(C_DIR),
        group_name="jobs.scheduling._core",
    )
    os.chdir(C_DIR)  # so setuptools reads no project config
    setup(
        name="tidepool-core",
        ext_modules=extensions,
        script_args=[
            "--quiet",
            "build_ext",
            "--build-lib",
            str(core.BUILD),
            "--build-temp",
            str(C_DIR / "obj"),
        ],
    )
    core.STAMP.write_text(digest + "\n")
    took = time.perf_counter() - t0
    print(
        f"core: compiled {len(sources)} modules in {took:.0f} s into {core.BUILD.relative_to(REPO)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
