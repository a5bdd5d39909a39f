"""The core is pure: importing it loads no Django and no third-party package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_core_imports_no_django_in_a_fresh_interpreter() -> None:
    code = (
        "import sys, json\n"
        "import jobs.scheduling.cycle, jobs.scheduling.classify, jobs.scheduling.scenario\n"
        "import jobs.scheduling.__main__\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'rest_framework', 'celery', 'channels'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO)},
    )
    assert json.loads(out.stdout) == []


def test_core_modules_import_only_the_standard_library() -> None:
    stdlib = sys.stdlib_module_names
    for path in (REPO / "jobs" / "scheduling").rglob("*.py"):
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "from") and not words[1].startswith("."):
                assert words[1].split(".")[0] in stdlib | {"__future__"}, (path, line)
