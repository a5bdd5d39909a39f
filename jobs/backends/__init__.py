"""The cluster backend in force: simulated (embedded) or Kubernetes."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jobs.backends.base import Backend

_backend: Backend | None = None


def get_backend() -> Backend:
    """The configured backend (one instance per process)."""
    global _backend
    if _backend is None:
        name = settings.TIDEPOOL_BACKEND
        if name == "simulated":
            from jobs.backends.simulated import SimulatedBackend

            _backend = SimulatedBackend(start_delay=settings.SIM_START_DELAY)
        elif name == "kubernetes":
            from jobs.backends.kubernetes import KubernetesBackend

            _backend = KubernetesBackend.from_settings()
        else:
            raise ImproperlyConfigured(
                f"TIDEPOOL_BACKEND {name!r} is not a cluster backend: use 'simulated' or "
                "'kubernetes'."
            )
    return _backend


def set_backend(backend: Backend | None) -> None:
    """Install a backend (tests); None goes back to the configured one."""
    global _backend
    close = getattr(_backend, "close", None)
    if close is not None and _backend is not backend:
        close()  # e.g. the Kubernetes backend's watch thread
    _backend = backend
