"""Production settings are safe to deploy and refuse to start without a secret."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    }
    environ.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_reports_no_warnings_with_production_settings() -> None:
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SETTINGS_MODULE="console.settings.production",
        SECRET_KEY="x" * 60 + "-production-secret-for-the-check",
        ALLOWED_HOSTS="tidepool.example",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_settings_refuse_to_start_without_secret_key() -> None:
    result = _manage("check", DJANGO_SETTINGS_MODULE="console.settings.production")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr
