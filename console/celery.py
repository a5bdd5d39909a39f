"""The Celery app of the distributed mode; beat schedules come from django-celery-beat."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_ready

from jobs.tasks import SCHEDULE

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.production")

app = Celery("tidepool")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Scaling and quota calendar rules are beat's crontab entries (one per rule), so their
# catch-up sweeps are not needed.
SWEEPS = {"jobs.tasks.scaling_rules_due", "quotas.tasks.calendar_rules_due"}
app.conf.beat_schedule = {
    name: {"task": name, "schedule": seconds, "options": {"expires": seconds}}
    for name, seconds in SCHEDULE.items()
    if name not in SWEEPS
}


@worker_ready.connect  # type: ignore[untyped-decorator]
def _serve_metrics(**_: Any) -> None:
    """TIDEPOOL_WORKER_METRICS_PORT: the worker serves its metrics there (console.metrics)."""
    port = int(os.environ.get("TIDEPOOL_WORKER_METRICS_PORT", "0") or 0)
    if port:
        from console.metrics import worker_metrics_serve

        worker_metrics_serve(port=port)
