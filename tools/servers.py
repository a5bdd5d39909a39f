"""PostgreSQL 15 and Redis from Debian's packages, on loopback: the pieces tests and stack share.

The distributed-mode tests (tests/servers.py) make throwaway servers of them; `make up`
(tools/stack.py) keeps its servers' data under .stack/. PostgreSQL refuses to run as root, so
as root its binaries run as the `postgres` user, which must own the folders it writes.
Standard library only: `make down` runs without the virtualenv.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

PG_BIN = Path("/usr/lib/postgresql/15/bin")
USER = "tidepool"  # the cluster's superuser and its one database


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    """Something accepts TCP connections on this loopback port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


def wait_for_port(port: int, *, timeout: float = 10) -> bool:
    """Wait until the port accepts connections; whether it did in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if listening(port):
            return True
        time.sleep(0.05)
    return False


def postgres_available() -> bool:
    """The PostgreSQL server binaries are installed."""
    return (PG_BIN / "initdb").exists()


def redis_available() -> bool:
    """redis-server is installed."""
    return shutil.which("redis-server") is not None


def as_postgres(args: list[str]) -> list[str]:
    """Run a PostgreSQL binary as the postgres user when we are root."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


def give_to_postgres(*paths: Path) -> None:
    """As root, hand folders (or files) the server writes to the postgres user."""
    if os.geteuid() == 0:
        for path in paths:
            shutil.chown(path, "postgres")


def postgres_init(data: Path) -> None:
    """initdb a cluster in `data` (its parent must be writable by the server's user)."""
    args = [str(PG_BIN / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8"]
    subprocess.run(as_postgres(args), check=True, capture_output=True)


def postgres_start(data: Path, *, port: int, sockets: Path, log: Path, fsync: bool = True) -> None:
    """Start the cluster on 127.0.0.1:port and wait until it accepts connections."""
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1"
    if not fsync:
        options += " -c fsync=off"
    args = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-l", str(log), "start"]
    subprocess.run(as_postgres(args), check=True, capture_output=True)


def postgres_running(data: Path) -> bool:
    """A server runs on this cluster (pg_ctl status)."""
    if not (data / "PG_VERSION").exists():
        return False
    status = subprocess.run(
        as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "status"]), capture_output=True
    )
    return status.returncode == 0


def postgres_stop(data: Path, *, mode: str = "fast") -> None:
    """Stop the cluster's server (`immediate` skips the shutdown checkpoint)."""
    subprocess.run(
        as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", mode, "-w", "stop"]),
        capture_output=True,
    )


def database_create(port: int, name: str = USER) -> None:
    """Create a database owned by the cluster's superuser (an error if it exists)."""
    args = [str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", USER, name]
    subprocess.run(as_postgres(args), check=True, capture_output=True)


def postgres_url(port: int, name: str = USER) -> str:
    """The URL Django's DATABASE_URL takes (console/settings/base.py)."""
    return f"postgres://{USER}@127.0.0.1:{port}/{name}"


def redis_args(port: int, *, data: Path | None = None) -> list[str]:
    """redis-server on 127.0.0.1:port; with `data`, snapshots there, else no persistence."""
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "no"]
    if data is None:
        return [*args, "--save", ""]
    return [*args, "--dir", str(data), "--save", "60 1", "--dbfilename", "dump.rdb"]
