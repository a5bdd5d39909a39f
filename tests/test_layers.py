"""The apps depend one way: console's helpers ← cluster ← quotas ← workspaces, jobs ← dashboard.

Every module of a lower app is parsed (imports inside functions count too) and none may import
an app above it. cluster and quotas never import jobs: what joins quotas or nodes with
workloads (usage, the node grid, scale previews) lives in dashboard.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# app -> apps it must not import
FORBIDDEN = {
    "cluster": {"quotas", "workspaces", "jobs", "dashboard"},
    "quotas": {"workspaces", "jobs", "dashboard"},
    "workspaces": {"dashboard"},
    "jobs": {"dashboard"},
}


def imported_apps(path: Path) -> set[tuple[int, str]]:
    """(line, top-level package) of every import in the module, however deep it sits."""
    found: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add((node.lineno, node.module.split(".")[0]))
    return found


def modules(app: str) -> list[Path]:
    """Every Python file of the app but its migrations (they name apps by string only)."""
    return [p for p in sorted((ROOT / app).rglob("*.py")) if "migrations" not in p.parts]


@pytest.mark.parametrize("app", sorted(FORBIDDEN), ids=str)
def test_app_imports_no_app_above_it(app: str) -> None:
    files = modules(app)
    assert files, f"no modules found under {app}/"
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {package}"
        for path in files
        for line, package in sorted(imported_apps(path))
        if package in FORBIDDEN[app]
    ]
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from jobs.models import Pod\n    import dashboard.charts\n")
    assert imported_apps(module) == {(2, "jobs"), (3, "dashboard")}
