"""Run the distributed-mode tests: real PostgreSQL and Redis, Celery worker and beat processes.

`python -m tests.distributed` starts the servers, points Django at them and runs pytest on
tests/distributed; `make test` calls it after the embedded suite.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.servers import postgres_available, postgres_server, redis, redis_available


def main() -> int:
    """Start the servers, run the tests, stop the servers."""
    if not (postgres_available() and redis_available()):
        print("PostgreSQL 15 and redis-server are needed (apt-get install postgresql redis-server)")
        return 1
    with postgres_server() as database, redis() as redis_url:
        env = dict(
            os.environ,
            DATABASE_URL=database.url,
            # test_faults restarts the server (tests.servers.postgres_restart)
            TIDEPOOL_PGDATA=str(database.data),
            REDIS_URL=redis_url,
            TIDEPOOL_DISTRIBUTED="1",
            TIDEPOOL_RUNNER="celery",
            SIM_START_DELAY="0",
        )
        args = [sys.executable, "-m", "pytest", "tests/distributed", *sys.argv[1:]]
        return subprocess.run(args, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
