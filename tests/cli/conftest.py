"""CLI fixtures: the control-loop helpers of the jobs tests."""

from __future__ import annotations

from tests.jobs.conftest import clock, sim, submit, tick  # noqa: F401  (fixtures shared with jobs)
