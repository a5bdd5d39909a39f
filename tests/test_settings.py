"""Production settings are safe to deploy; DATABASE_URL keeps its options (dj-database-url)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.settings.base import database

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


def test_database_url_keeps_sslmode_and_other_options() -> None:
    config = database("postgres://tp:s%40cret@db.example:6432/tidepool?sslmode=verify-full")
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["USER"], config["PASSWORD"], config["HOST"], config["PORT"]) == (
        "tp",
        "s@cret",
        "db.example",
        6432,
    )
    assert config["NAME"] == "tidepool"
    assert config["OPTIONS"]["sslmode"] == "verify-full"


def test_postgres_connections_come_from_a_pool_checked_before_each_loan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_POOL_MAX", "20")
    config = database("postgresql://tp@127.0.0.1/tidepool?sslmode=require")
    assert config["OPTIONS"] == {"sslmode": "require", "pool": {"min_size": 2, "max_size": 20}}
    assert (config["CONN_MAX_AGE"], config["CONN_HEALTH_CHECKS"]) == (0, True)


def test_without_the_pool_connections_last_as_long_as_the_environment_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert database("postgres://tp@127.0.0.1/tidepool?pool=false")["CONN_MAX_AGE"] == 60
    monkeypatch.setenv("DATABASE_CONN_MAX_AGE", "5")
    config = database("postgres://tp@127.0.0.1/tidepool?pool=off")
    assert (config["OPTIONS"], config["CONN_MAX_AGE"]) == ({}, 5)
    monkeypatch.setenv("DATABASE_POOL", "0")
    assert database("postgres://tp@127.0.0.1/tidepool")["OPTIONS"] == {}


def test_without_a_url_sqlite_keeps_its_embedded_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SQLITE_PATH", "/tmp/tp.sqlite3")
    for config in (database(""), database("sqlite:////tmp/tp.sqlite3")):
        assert config["ENGINE"] == "console.fast.sqlite"
        assert config["NAME"] == "/tmp/tp.sqlite3"
        assert config["CONN_MAX_AGE"] is None
        assert config["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
        assert "journal_mode=WAL" in config["OPTIONS"]["init_command"]


def test_sslmode_survives_into_the_loaded_settings() -> None:
    result = _manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS'])",
        DJANGO_SETTINGS_MODULE="console.settings.test",
        DATABASE_URL="postgres://tp@db.example/tidepool?sslmode=require",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("{'sslmode': 'require', 'pool': ")


def test_an_unknown_placement_is_refused_by_name() -> None:
    result = _manage(
        "check", DJANGO_SETTINGS_MODULE="console.settings.local", TIDEPOOL_PLACEMENT="worst"
    )
    assert result.returncode != 0
    assert "TIDEPOOL_PLACEMENT must be fgd or bestfit, not 'worst'" in result.stderr
