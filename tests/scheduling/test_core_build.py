"""The compiled core (`make core`) is used only while it matches the sources; pure otherwise.

Importing the core alone never looks at the build: `_loader.load()`, which the jobs app and the
core's command line call at start, does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import jobs.scheduling._loader as core
from jobs.scheduling.types import Resources

REPO = Path(__file__).resolve().parents[2]
# `make test` sets this: there the compiled core must really be the one under test.
EXPECTED = bool(os.environ.get("TIDEPOOL_EXPECT_COMPILED")) and not os.environ.get(
    "TIDEPOOL_PURE_CORE"
)

# pytest-django has set Django up, so the jobs app's ready() has already decided.
STATUS = core.load()
needs_build = pytest.mark.skipif(
    STATUS != "compiled" and not EXPECTED, reason=f"no compiled core in use ({STATUS})"
)

PROBE = (
    "import json, jobs.scheduling._loader as l\n"
    "status = l.load()\n"
    "import jobs.scheduling.cycle as cy, jobs.scheduling.preemption.base as b\n"
    "print(json.dumps([status, cy.__file__, b.__file__]))\n"
)
# Importing the core alone: which files it opens, and whether the loader ran.
PLAIN = (
    "import json, sys\n"
    "opened = []\n"
    "sys.addaudithook(lambda e, a: opened.append(str(a[0])) if e == 'open' else None)\n"
    "import jobs.scheduling.cycle as cy, jobs.scheduling.preemption.base as b\n"
    "print(json.dumps(['jobs.scheduling._loader' in sys.modules, cy.__file__, opened]))\n"
)


def _run(root: Path, code: str, **env: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(root), **env},
    )
    return json.loads(out.stdout)


def _probe(root: Path, **env: str) -> tuple[str, str, str]:
    status, cycle_file, base_file = _run(root, PROBE, **env)
    return status, cycle_file, base_file


def test_importing_the_core_reads_no_stamp_and_runs_no_loader() -> None:
    loaded, cycle_file, opened = _run(REPO, PLAIN)
    assert not loaded
    assert cycle_file == str(REPO / "jobs" / "scheduling" / "cycle.py")
    assert not [name for name in opened if Path(name).is_relative_to(core.BUILD)]


def test_status_follows_the_stamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIDEPOOL_PURE_CORE", raising=False)
    assert core.core_status(tmp_path) == "pure: no compiled core (run make core)"
    stamp = tmp_path / core.STAMP.name
    stamp.write_text(core.sources_digest() + "\n")
    assert core.core_status(tmp_path) == "compiled"
    stamp.write_text("0" * 64 + "\n")
    assert core.core_status(tmp_path).startswith("pure: the compiled core is stale")
    stamp.write_text(core.sources_digest() + "\n")
    monkeypatch.setenv("TIDEPOOL_PURE_CORE", "1")
    assert core.core_status(tmp_path) == "pure: TIDEPOOL_PURE_CORE is set"


def test_digest_covers_every_compiled_module_but_not_the_loader() -> None:
    names = {p.relative_to(core.PACKAGE).as_posix() for p in core.compiled_sources()}
    assert {"cycle.py", "types.py", "preemption/__init__.py", "preemption/base.py"} <= names
    assert not names & {"__init__.py", "__main__.py", "_loader.py"}


@needs_build
def test_fresh_build_is_loaded_and_an_edited_source_falls_back_to_pure(tmp_path: Path) -> None:
    assert STATUS == "compiled", STATUS
    (tmp_path / "jobs").mkdir()
    shutil.copy(REPO / "jobs" / "__init__.py", tmp_path / "jobs" / "__init__.py")
    shutil.copytree(
        core.PACKAGE, tmp_path / "jobs" / "scheduling", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(core.BUILD, tmp_path / "build" / "core")
    # an editor's lock file (Emacs: a dangling link) is no module and changes nothing
    (tmp_path / "jobs" / "scheduling" / ".#cycle.py").symlink_to("carol@host.1234")

    status, cycle_file, base_file = _probe(tmp_path)
    assert status == "compiled"
    assert Path(cycle_file).is_relative_to(tmp_path / "build" / "core")
    assert cycle_file.endswith(".so") and base_file.endswith(".so")
    # without load(), even a fresh build is not used
    assert _run(tmp_path, PLAIN)[1] == str(tmp_path / "jobs" / "scheduling" / "cycle.py")

    status, cycle_file, _ = _probe(tmp_path, TIDEPOOL_PURE_CORE="1")
    assert status == "pure: TIDEPOOL_PURE_CORE is set"
    assert cycle_file == str(tmp_path / "jobs" / "scheduling" / "cycle.py")

    edited = tmp_path / "jobs" / "scheduling" / "preemption" / "base.py"
    edited.write_text(edited.read_text() + "# an edit not yet compiled\n")
    status, cycle_file, base_file = _probe(tmp_path)
    assert status.startswith("pure: the compiled core is stale")
    assert cycle_file == str(tmp_path / "jobs" / "scheduling" / "cycle.py")
    assert base_file == str(edited)


@needs_build
def test_pure_core_passes_the_scenario_and_cli_tests() -> None:
    """The main run tests the compiled core; the pure one must keep passing the same scenarios."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "tests/scheduling/test_scenarios.py",
            "tests/scheduling/test_cli.py",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "TIDEPOOL_PURE_CORE": "1"},
    )
    assert out.returncode == 0, out.stdout[-3000:]


def test_resources_compare_and_hash_by_value() -> None:
    # A compiled class defining a comparison dunder once lost its dataclass __eq__ and __hash__.
    a, b = Resources(1000, 2, 3), Resources(1000, 2, 3)
    assert a == b
    assert {a: "x"}[b] == "x"
    assert a != Resources(1000, 2, 4)


def test_a_core_module_imported_before_load_keeps_the_process_pure() -> None:
    code = (
        "import json, jobs.scheduling.types, jobs.scheduling._loader as l\n"
        "print(json.dumps([l.load(), l.load()]))\n"
    )
    first, again = _run(REPO, code)
    # types imports fragmentation (the snapshot's target shapes): the first one in name order
    assert first == again == "pure: jobs.scheduling.fragmentation was imported before load()"
