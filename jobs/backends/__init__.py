"""The cluster backend in force: simulated (embedded) or Kubernetes."""

from __future__ import annotations

from django.conf import settings

from jobs.backends.base import Backend

_backend: Backend | None = None


def get_backend() -> Backend:
    """The configured backend (one instance per process)."""
    global _backend
    if _backend is None:
        name = settings.TIDEPOOL_BACKEND
        if name != "simulated":
            raise RuntimeError(f"Unknown cluster backend {name!r}; only 'simulated' is built.")
        from jobs.backends.simulated import SimulatedBackend

        _backend = SimulatedBackend(start_delay=settings.SIM_START_DELAY)
    return _backend


def set_backend(backend: Backend | None) -> None:
    """Install a backend (tests); None goes back to the configured one."""
    global _backend
    _backend = backend
