"""Two concurrent scales that together would break the tree's sums cannot both succeed.

Runs on a throwaway PostgreSQL 15 cluster (initdb in a temp dir, a free port, run as the
postgres user when we are root), in a fresh interpreter so Django connects to it; the race
itself is two threads, each with its own connection, posting scale through the API.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = [Path("/usr/lib/postgresql/15/bin"), Path("/usr/local/bin"), Path("/usr/bin")]


def _bin(name: str) -> Path | None:
    for directory in CANDIDATES:
        if (directory / name).exists():
            return directory / name
    found = shutil.which(name)
    return Path(found) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL cluster of our own for this session; skipped if the binaries are missing."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    base = Path(tempfile.mkdtemp(prefix="tidepool-pg-"))
    data, sockets = base / "data", base / "run"
    sockets.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        shutil.chown(base, "postgres")
        shutil.chown(sockets, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run(
        [*as_user, str(initdb), "-D", str(data), "-U", "tidepool", "-A", "trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        [
            *as_user,
            str(pg_ctl),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(base / "log"),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        createdb = _bin("createdb")
        assert createdb is not None
        subprocess.run(
            [str(createdb), "-h", "127.0.0.1", "-p", str(port), "-U", "tidepool", "tidepool"],
            check=True,
            capture_output=True,
        )
        yield f"postgres://tidepool@127.0.0.1:{port}/tidepool"
    finally:
        subprocess.run(
            [*as_user, str(pg_ctl), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.postgres
def test_concurrent_scales_cannot_both_break_the_parent(postgres_url: str) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": postgres_url,
        "DJANGO_SETTINGS_MODULE": "console.settings.test",
    }
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tests.api.pg_race", "5"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rounds = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(rounds) == 5
    for r in rounds:
        codes = sorted(code for code, _ in r["codes"].values())
        assert codes == [200, 400], r
        refused = next(body for code, body in r["codes"].values() if code == 400)
        assert "At most" in refused["min_gpu"][0], refused
        assert r["children_min_gpu"] == 128_000, r
    assert time.monotonic() - started < 120
