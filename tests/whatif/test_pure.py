"""The replay engine runs without the ORM: importing it loads no Django module."""

from __future__ import annotations

import subprocess
import sys


def test_the_replay_engine_imports_no_django() -> None:
    code = (
        "import sys, whatif.replay.compare, whatif.changes; "
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
