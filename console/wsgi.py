"""WSGI entry point (HTTP only; websockets need the ASGI app)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.local")
application = get_wsgi_application()
