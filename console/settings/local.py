"""Embedded mode for `make demo`: SQLite, in-memory channels, in-process runner."""

from __future__ import annotations

from .base import *  # noqa: F403
from .base import MIDDLEWARE, env

DEBUG = env("DEBUG", "1") == "1"
SECRET_KEY = env("SECRET_KEY", "") or "tidepool-local-demo-key-not-for-production"

# Static files come from the finders here; WhiteNoise serves collected files in production.
MIDDLEWARE = [m for m in MIDDLEWARE if "whitenoise" not in m]
