"""Embedded mode for `make demo`: SQLite, in-memory channels, in-process runner."""

from __future__ import annotations

from .base import *  # noqa: F403
from .base import MIDDLEWARE, env, env_bool

# Off unless asked for: the demo shows the console's own 404/403/500 pages, not Django's
# debug pages. `manage.py serve` serves static files either way (console.serving).
DEBUG = env_bool("TIDEPOOL_DEBUG", False)
SECRET_KEY = env("SECRET_KEY", "") or "tidepool-local-demo-key-not-for-production"

# Static files come from the finders here; WhiteNoise serves collected files in production.
MIDDLEWARE = [m for m in MIDDLEWARE if "whitenoise" not in m]
