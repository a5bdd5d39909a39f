"""Settings for the test suite: fast hashing, an isolated database."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .base import *  # noqa: F403
from .base import DATABASES, MIDDLEWARE, env

SECRET_KEY = "tidepool-test-key"
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["*"]
TIDEPOOL_RUNNER = env("TIDEPOOL_RUNNER", "off")
# Tests flush buffered reports themselves (jobs.reports.buffer), never from a thread.
TIDEPOOL_REPORT_FLUSH_SECONDS = 0.0

# The test database is a file, as the embedded mode's is, so it locks as the product does: in
# WAL mode a page reads while the control loop writes. Django's default for SQLite, a shared
# in-memory database, locks per table and fails a writer at once while another thread reads
# ("database table is locked"), which the browser tests' server thread now and then did.
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    DATABASES["default"]["TEST"] = {
        "NAME": str(Path(tempfile.gettempdir()) / f"tidepool-test-{os.getpid()}.sqlite3")
    }

# Static files come from the finders here; WhiteNoise serves collected files in production.
MIDDLEWARE = [m for m in MIDDLEWARE if "whitenoise" not in m]
