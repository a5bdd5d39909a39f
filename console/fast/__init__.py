"""The speed layer, behind one switch: ``TIDEPOOL_FAST_PATHS`` (on unless the environment says 0).

On, the hot paths take hand-written routes that answer exactly what the stock ones do:

- ``statements``: reads compiled to SQL once per connection and shape (token, permissions,
  list pages and counts, a submit's reads);
- ``rows``: the workload lists and action answers built from ``values()`` rows with the
  serializers' own field plan, instead of model instances through ``ModelSerializer``;
- ``sqlite``: the embedded mode's SQLite backend, whose writers queue on a process lock
  instead of polling SQLite's busy handler;
- ``console.serving`` (embedded mode only): each HTTP request in one hop to a long-lived
  thread that keeps its SQLite connection, instead of Django's ``ASGIHandler``.

Off, the stock ORM querysets, DRF serializers, Django's SQLite backend and ASGI handler serve
the same JSON byte for byte (tests/api/test_fast_paths.py compares them). ``make pytest``
runs the API, page, job, workspace and quota tests both ways.

Measured with ``bench/api.py --compare`` (10,000 jobs, 20 clients, embedded mode, one run on
two busy cores): server CPU per request, on/off, 6.3/33.6 ms for a list page of 50 and
10.5/29.2 ms for a submit; p95 243/1159 ms and 570/3206 ms (README, "Speed layer").
"""

from __future__ import annotations

from django.conf import settings


def on() -> bool:
    """Whether the hand-written paths serve (the setting, read on each call so tests flip it)."""
    return bool(settings.TIDEPOOL_FAST_PATHS)
