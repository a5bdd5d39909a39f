"""Throwaway PostgreSQL and Redis servers on loopback for the distributed-mode tests.

They run from Debian's packages (`.ci/run` installs them). PostgreSQL refuses to run as
root, so as root the cluster is created and started as the `postgres` user.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    """Run a PostgreSQL binary as the postgres user when we are root."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


def postgres_available() -> bool:
    """The PostgreSQL server binaries are installed."""
    return (PG_BIN / "initdb").exists()


def redis_available() -> bool:
    """redis-server is installed."""
    return shutil.which("redis-server") is not None


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway PostgreSQL: its URL and its data directory."""

    url: str
    data: Path


@contextmanager
def postgres() -> Iterator[str]:
    """A fresh PostgreSQL cluster; yields its URL (user tidepool, database tidepool)."""
    with postgres_server() as server:
        yield server.url


def postgres_restart(data: Path) -> None:
    """Restart the server in fast mode: every session is cut and its transaction rolled back."""
    subprocess.run(
        _as_postgres(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(data),
                "-m",
                "fast",
                "-w",
                "-l",
                str(data.parent / "log"),
                "restart",
            ]
        ),
        check=True,
        capture_output=True,
    )


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A fresh PostgreSQL cluster (user tidepool, database tidepool), stopped at the end."""
    root = Path(tempfile.mkdtemp(prefix="tidepool-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    port = free_port()
    subprocess.run(
        _as_postgres(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(data),
                "-U",
                "tidepool",
                "--auth=trust",
                "-E",
                "UTF8",
            ]
        ),
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        _as_postgres(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-w",
                "-l",
                str(root / "log"),
                "start",
            ]
        ),
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            _as_postgres(
                [
                    str(PG_BIN / "createdb"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-U",
                    "tidepool",
                    "tidepool",
                ]
            ),
            check=True,
            capture_output=True,
        )
        yield PostgresServer(f"postgres://tidepool@127.0.0.1:{port}/tidepool", data)
    finally:
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def redis() -> Iterator[str]:
    """A fresh Redis with no persistence; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
