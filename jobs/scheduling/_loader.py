"""Put the compiled core (`make core`, tools/build_core.py) first on this package's path.

Importing the core reads no file beyond its modules: the pure-Python ones load as any
package's do. A process that wants the compiled core calls load() once, before it imports a
core module (the jobs app's ready(), the core's command line, the benchmarks). load() takes
build/core only while its stamp matches the hash of the sources here, so an edited module runs
as pure Python until the next `make core`, never as stale machine code. TIDEPOOL_PURE_CORE=1
keeps the pure core.
"""

from __future__ import annotations

import hashlib
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
BUILD = PACKAGE.parents[1] / "build" / "core"
STAMP = BUILD / "sources.sha256"
# Never compiled: they run before the build is on the path.
NOT_COMPILED = ("__init__.py", "__main__.py", "_loader.py")
_status: list[str] = []


def pure_forced() -> bool:
    """Whether TIDEPOOL_PURE_CORE asks for the pure-Python core."""
    return os.environ.get("TIDEPOOL_PURE_CORE", "") not in ("", "0")


def compiled_sources() -> list[Path]:
    """The modules `make core` compiles, in a stable order."""
    skip = {PACKAGE / name for name in NOT_COMPILED}
    # hidden files are editors' (an Emacs lock is a dangling `.#name.py` link), not modules
    return sorted(p for p in PACKAGE.rglob("*.py") if p not in skip and not p.name.startswith("."))


def sources_digest() -> str:
    """A hash of the compiled modules' sources (names and contents) and of the interpreter's
    extension ABI, so a build made for another Python is never taken for this one's."""
    h = hashlib.sha256(EXTENSION_SUFFIXES[0].encode())
    for path in compiled_sources():
        h.update(f"{path.relative_to(PACKAGE).as_posix()}\0{path.stat().st_size}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def core_status(build: Path = BUILD) -> str:
    """'compiled' when `build` holds a fresh compiled core, else why the pure one is used."""
    if pure_forced():
        return "pure: TIDEPOOL_PURE_CORE is set"
    stamp = build / STAMP.name
    try:
        if not stamp.exists():
            return "pure: no compiled core (run make core)"
        if stamp.read_text().strip() != sources_digest():
            return "pure: the compiled core is stale, the sources changed (run make core)"
    except OSError as exc:  # never let the check break the process
        return f"pure: cannot check the compiled core ({exc})"
    return "compiled"


def load() -> str:
    """Use the compiled core if it is fresh, once per process; 'compiled' or why it is pure.

    A core module imported before the first call keeps the process pure: compiled and pure
    modules of the core cannot be mixed.
    """
    if not _status:
        package = __name__.rpartition(".")[0]
        early = sorted(
            name
            for name in sys.modules
            if name.startswith(f"{package}.") and name != __name__ and name != f"{package}.__main__"
        )
        status = f"pure: {early[0]} was imported before load()" if early else core_status()
        if status == "compiled":
            sys.modules[package].__path__.insert(0, str(BUILD / "jobs" / "scheduling"))
        _status.append(status)
    return _status[0]
