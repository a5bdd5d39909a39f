"""Commands that ask no server: `explain`, `completion`, help, usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from console.cli import main
from tests.scheduling.test_cli import REPO, scenario


@pytest.fixture
def run(capsys: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run a command; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("TIDEPOOL_CONFIG", str(tmp_path / "config.json"))

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def core_answer(path: Path) -> Any:
    """What `python -m jobs.scheduling explain` prints for the scenario at `path`."""
    done = subprocess.run(
        [sys.executable, "-m", "jobs.scheduling", "explain", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_explain_prints_the_cores_decisions(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario()))
    code, out, _ = run("explain", str(path), "--json")
    assert code == 0
    answer = json.loads(out)
    assert answer == core_answer(path)
    assert {p["workload"] for p in answer["pending"]} >= {"w4"}

    code, out, _ = run("explain", str(path), "-o", "yaml")
    assert code == 0 and yaml.safe_load(out) == answer
    as_yaml = tmp_path / "scenario.yaml"
    as_yaml.write_text(yaml.safe_dump(scenario()))
    code, out, _ = run("explain", str(as_yaml), "--json")
    assert code == 0 and json.loads(out) == answer

    code, out, _ = run("explain", str(path))
    assert code == 0 and out.splitlines()[0].split() == ["DECISION", "WORKLOAD", "DETAIL"]
    assert any(line.startswith("pending") and "w4" in line for line in out.splitlines())
    assert "LABEL AFTER THE CYCLE" in out


def test_explain_refuses_a_malformed_scenario(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(scenario(nodes="no")))
    code, out, err = run("explain", str(path))
    assert code == 1 and not out and err.startswith("error: ")
    code, _, err = run("explain", str(tmp_path / "missing.json"))
    assert code == 2 and "No such file" in err


def test_usage_errors_exit_2_and_help_exits_0(run: Any) -> None:
    code, _, err = run("quota", "scale", "Quota 1.1")
    assert code == 2 and "Missing option '--gpu'" in err
    code, _, err = run("job", "ls", "--status", "Sleeping")
    assert code == 2 and "Invalid value for '--status'" in err
    code, out, _ = run("job", "--help")
    assert code == 0 and "Training jobs: submit, list, read, cancel, logs." in out
    code, _, err = run("job", "ls")
    assert code == 1 and "Not logged in" in err


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", "_TIDEPOOL_COMPLETE=bash_complete"), ("zsh", "#compdef tidepool")],
    ids=["bash", "zsh"],
)
def test_completion_prints_the_shells_script(run: Any, shell: str, marker: str) -> None:
    code, out, _ = run("completion", shell)
    assert code == 0 and marker in out


def test_completion_completes_commands_and_options() -> None:
    def complete(words: str, cword: int) -> list[str]:
        env = {
            **os.environ,
            "_TIDEPOOL_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(cword),
        }
        done = subprocess.run(
            [sys.executable, "-m", "console.cli"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return [line.split(",", 1)[1] for line in done.stdout.splitlines()]

    assert complete("tidepool qu", 1) == ["quota"]
    assert set(complete("tidepool service rules ", 3)) == {"add", "ls", "rm"}
    assert complete("tidepool job submit --idle idle", 4) == ["idle_only"]
