"""Settings for the test suite: fast hashing, an isolated database."""

from __future__ import annotations

from .base import *  # noqa: F403
from .base import MIDDLEWARE, env

SECRET_KEY = "tidepool-test-key"
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["*"]
TIDEPOOL_RUNNER = env("TIDEPOOL_RUNNER", "off")
# Tests flush buffered reports themselves (jobs.reports.buffer), never from a thread.
TIDEPOOL_REPORT_FLUSH_SECONDS = 0.0

# Static files come from the finders here; WhiteNoise serves collected files in production.
MIDDLEWARE = [m for m in MIDDLEWARE if "whitenoise" not in m]
