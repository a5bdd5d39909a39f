"""The Celery app of the distributed mode; beat schedules come from django-celery-beat."""

from __future__ import annotations

import os

from celery import Celery

from jobs.tasks import SCHEDULE

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.production")

app = Celery("tidepool")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Scaling rules are beat's crontab entries (one per rule), so the catch-up task is not needed.
app.conf.beat_schedule = {
    name: {"task": name, "schedule": seconds, "options": {"expires": seconds}}
    for name, seconds in SCHEDULE.items()
    if name != "jobs.tasks.scaling_rules_due"
}
