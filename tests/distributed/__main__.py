"""Run the distributed-mode tests: real PostgreSQL and Redis, Celery worker and beat processes.

`python -m tests.distributed` starts the servers, points Django at them and runs pytest on
tests/distributed; `make test` calls it after the embedded suite.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.servers import postgres, postgres_available, redis, redis_available


def main() -> int:
    """Start the servers, run the tests, stop the servers."""
    if not (postgres_available() and redis_available()):
        print("PostgreSQL 15 and redis-server are needed (apt-get install postgresql redis-server)")
        return 1
    with postgres() as database_url, redis() as redis_url:
        env = dict(
            os.environ,
            DATABASE_URL=database_url,
            REDIS_URL=redis_url,
            TIDEPOOL_DISTRIBUTED="1",
            TIDEPOOL_RUNNER="celery",
            SIM_START_DELAY="0",
        )
        args = [sys.executable, "-m", "pytest", "tests/distributed", *sys.argv[1:]]
        return subprocess.run(args, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
