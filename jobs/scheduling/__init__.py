"""The pure scheduling core of Tidepool: standard library only, the clock passed in.

`make core` compiles every module of the core but this one and `__main__` with mypyc into
`build/core/`, next to a stamp holding the hash of the sources it compiled. Importing the
package puts that build first on `__path__` only while the stamp matches the sources here, so
an edited module runs as pure Python until the next `make core`, never as stale machine code.
`TIDEPOOL_PURE_CORE=1` forces pure Python.
"""

from __future__ import annotations

import hashlib
import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
BUILD = PACKAGE.parents[1] / "build" / "core"
STAMP = BUILD / "sources.sha256"


def compiled_sources() -> list[Path]:
    """The modules `make core` compiles, in a stable order."""
    skip = {PACKAGE / "__init__.py", PACKAGE / "__main__.py"}
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
    if os.environ.get("TIDEPOOL_PURE_CORE", "") not in ("", "0"):
        return "pure: TIDEPOOL_PURE_CORE is set"
    stamp = build / STAMP.name
    try:
        if not stamp.exists():
            return "pure: no compiled core (run make core)"
        if stamp.read_text().strip() != sources_digest():
            return "pure: the compiled core is stale, the sources changed (run make core)"
    except OSError as exc:  # never let the check break the import
        return f"pure: cannot check the compiled core ({exc})"
    return "compiled"


STATUS = core_status()
COMPILED = STATUS == "compiled"
if COMPILED:
    __path__.insert(0, str(BUILD / "jobs" / "scheduling"))
