"""CLI fixtures: `cli` runs a command against the live test server; the control-loop helpers
of the jobs tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from django.core.cache import cache

from console.cli import main
from tests.jobs.conftest import clock, sim, submit, tick  # noqa: F401  (fixtures shared with jobs)

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(live_server: Any, demo: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any):
    """Run a command; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("TIDEPOOL_CONFIG", str(tmp_path / "config.json"))
    # Each test logs in afresh, as one person would once: the token throttle (20 a minute
    # from one address) counts this test's logins alone, not the whole directory's.
    cache.clear()

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    run.url = live_server.url  # type: ignore[attr-defined]
    return run


def login(cli: Any, user: str) -> None:
    """Log `user` in with the demo password."""
    code, out, err = cli("login", cli.url, "--username", user, "--password", f"tidepool-{user}")
    assert code == 0 and f"as {user}" in out, err


def as_json(cli: Any, *argv: str) -> Any:
    """Run a command with --json; it must succeed and print JSON."""
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def as_yaml(cli: Any, *argv: str) -> Any:
    """Run a command with -o yaml; it must succeed and print YAML."""
    code, out, err = cli(*argv, "-o", "yaml")
    assert code == 0, err
    return yaml.safe_load(out)


def fails(cli: Any, *argv: str) -> str:
    """Run a command that must fail with exit code 1; its stderr."""
    code, out, err = cli(*argv)
    assert code == 1 and not out, (code, out, err)
    assert err.startswith("error: ")
    return str(err)
