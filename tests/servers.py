"""Throwaway PostgreSQL and Redis servers on loopback for the distributed-mode tests.

They run from Debian's packages (`.ci/run` installs them) through tools/servers.py, which
`make up` uses too. PostgreSQL refuses to run as root, so as root the cluster is created and
started as the `postgres` user.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools.servers import (
    PG_BIN,
    as_postgres,
    database_create,
    free_port,
    give_to_postgres,
    postgres_available,
    postgres_init,
    postgres_start,
    postgres_stop,
    postgres_url,
    redis_args,
    redis_available,
    wait_for_port,
)

__all__ = [
    "PG_BIN",
    "free_port",
    "postgres",
    "postgres_available",
    "postgres_restart",
    "postgres_stopped",
    "postgres_server",
    "redis",
    "redis_available",
]


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
    args = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w"]
    subprocess.run(
        as_postgres([*args, "-l", str(data.parent / "log"), "restart"]),
        check=True,
        capture_output=True,
    )


@contextmanager
def postgres_stopped(data: Path) -> Iterator[None]:
    """The server stopped (fast mode) for the block, then started again with the options it
    ran with (pg_ctl keeps them in postmaster.opts)."""
    import shlex

    opts = shlex.split((data / "postmaster.opts").read_text())[1:]  # without the binary
    ctl = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-w"]
    subprocess.run(as_postgres([*ctl, "-m", "fast", "stop"]), check=True, capture_output=True)
    try:
        yield
    finally:
        started = [*ctl, "-l", str(data.parent / "log"), "-o", shlex.join(opts), "start"]
        subprocess.run(as_postgres(started), check=True, capture_output=True)


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A fresh PostgreSQL cluster (user tidepool, database tidepool), stopped at the end."""
    root = Path(tempfile.mkdtemp(prefix="tidepool-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    give_to_postgres(root, sockets)
    port = free_port()
    postgres_init(data)
    postgres_start(data, port=port, sockets=sockets, log=root / "log", fsync=False)
    try:
        database_create(port)
        yield PostgresServer(postgres_url(port), data)
    finally:
        postgres_stop(data, mode="immediate")
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def redis() -> Iterator[str]:
    """A fresh Redis with no persistence; yields its URL."""
    server = RedisServer()
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


class RedisServer:
    """A redis-server with no persistence on one port, which a test may stop and start again."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self.proc = subprocess.Popen(
            redis_args(self.port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        """Stop the server (its data goes with it, as after a crash without persistence)."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None
