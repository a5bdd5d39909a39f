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
from pathlib import Path

from tools.servers import (
    PG_BIN,
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

__all__ = ["PG_BIN", "free_port", "postgres", "postgres_available", "redis", "redis_available"]


@contextmanager
def postgres() -> Iterator[str]:
    """A fresh PostgreSQL cluster; yields its URL (user tidepool, database tidepool)."""
    root = Path(tempfile.mkdtemp(prefix="tidepool-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    give_to_postgres(root, sockets)
    port = free_port()
    postgres_init(data)
    postgres_start(data, port=port, sockets=sockets, log=root / "log", fsync=False)
    try:
        database_create(port)
        yield postgres_url(port)
    finally:
        postgres_stop(data, mode="immediate")
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def redis() -> Iterator[str]:
    """A fresh Redis with no persistence; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(redis_args(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
