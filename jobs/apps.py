"""App config for workloads, the control loop and the cluster backends."""

from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Training jobs, inference services, interactive instances."""

    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """The compiled core if fresh; in the distributed mode, cycles and syncs go to Celery."""
        from django.conf import settings

        from jobs.scheduling._loader import load

        load()

        if settings.TIDEPOOL_RUNNER == "celery":
            from jobs.wakeup import cycle_queue, on_cycle_requested, on_sync_requested, sync_queue

            on_cycle_requested(cycle_queue)
            on_sync_requested(sync_queue)
