"""Two concurrent scales that together would break the tree's sums cannot both succeed.

Runs on a throwaway PostgreSQL 15 cluster (initdb in a temp dir, a free port, run as the
postgres user when we are root), in a fresh interpreter so Django connects to it; the race
itself is two threads, each with its own connection, posting scale through the API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.servers import postgres, postgres_available

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL cluster of our own for this session (tests/servers.py)."""
    if not postgres_available():
        pytest.skip("PostgreSQL 15 server binaries are not installed")
    with postgres() as url:
        yield url


def _script(url: str, *args: str, **extra: str) -> list[str]:
    """Run `python -m args…` on the database at url in a fresh interpreter; its output lines."""
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "console.settings.test",
        **extra,
    }
    result = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


@pytest.mark.postgres
def test_concurrent_scales_cannot_both_break_the_parent(postgres_url: str) -> None:
    lines = _script(postgres_url, "tests.api.pg_race", "5")
    rounds = [json.loads(line) for line in lines if line.startswith("{")]
    assert len(rounds) == 5
    for r in rounds:
        codes = sorted(code for code, _ in r["codes"].values())
        assert codes == [200, 400], r
        refused = next(body for code, body in r["codes"].values() if code == 400)
        assert "At most" in refused["resources"]["0"]["min"]["gpu"][0], refused
        assert r["children_min_gpu"] == 128_000, r


@pytest.mark.postgres
def test_the_apis_statements_compile_on_postgresql(postgres_url: str) -> None:
    """Each read the API compiles once must compile on PostgreSQL too (stand-ins fit its
    columns), not fall back to Django's compile on every call."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE statements")
    # Of the speed layer itself: on, whichever way the suite runs.
    url = postgres_url.rsplit("/", 1)[0] + "/statements"
    lines = _script(url, "tests.api.pg_statements", TIDEPOOL_FAST_PATHS="1")
    out = json.loads(lines[-1])
    assert out["codes"] == [201, 200, 200, 201], out
    compiled = out["compiled"]
    for name in (
        "console.auth._token_and_user",
        "console.auth._permissions",
        "jobs.api.serializers._workspace_named",
        "jobs.api.serializers._pools_of",
        "jobs.services.workloads._named",
        "jobs.services.workloads._limits_of",
    ):
        assert compiled.get(name), (name, compiled)
    assert all(all(shapes) for shapes in compiled.values()), compiled


@pytest.mark.postgres
def test_a_cap_lowered_during_an_open_instance_submit_shortens_that_instance_too(
    postgres_url: str,
) -> None:
    """The submit holds its workspace's row (FOR NO KEY UPDATE) from reading the cap to its
    commit; the admin's change waits for it, then finds the new instance and lowers it."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE limits_race")
    lines = _script(postgres_url.rsplit("/", 1)[0] + "/limits_race", "tests.api.pg_limits_race")
    out = json.loads(lines[-1])
    assert out == {
        "waited": True,
        "shortened": ["forever"],
        "max_duration": 8 * 3600,
        "events": ["submitted", "limit"],
    }, out


@pytest.mark.postgres
def test_hostile_input_is_refused_before_postgresql_sees_it(postgres_url: str) -> None:
    """NUL in a path, filter or JSON string and numbers past a 32-bit column answer 4xx."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE hostile")
    lines = _script(postgres_url.rsplit("/", 1)[0] + "/hostile", "tests.api.pg_hostile")
    codes = json.loads(lines[-1])["codes"]
    assert codes == {
        "filter": 400,
        "member path": 400,
        "slug reference": 400,
        "label key": 400,
        "checkpoint minutes": 200,  # the form again, the error on its field
        "max hours": 200,
        "gpus × replicas": 400,
        "quotas' pending usage": 200,
    }, codes
