"""The Tidepool project package; loading it loads the Celery app so tasks bind to it."""

from console.celery import app as celery_app

__all__ = ["celery_app"]
