"""Read the API's pages and submit through it on PostgreSQL; print which statements compiled.

Run by test_postgres.py in a fresh interpreter with DATABASE_URL set (a database of its own).
Prints one JSON object: for every statement used, whether each shape it met compiled.
"""

from __future__ import annotations

import gc
import json
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.test")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from console.fast.statements import Statement  # noqa: E402


def main() -> None:
    from console.demo import seed_demo

    assert connection.vendor == "postgresql", connection.vendor
    call_command("migrate", verbosity=0)
    seed_demo()
    bob = get_user_model().objects.get(username="bob")
    client = APIClient(HTTP_HOST="127.0.0.1")
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=bob)[0].key}")
    job = {"workspace": "workspace_b", "name": "on-postgres", "gpu": 1, "node_pools": ["A100-80G"]}
    codes = [
        client.post("/api/v1/jobs/", job, format="json").status_code,
        client.get("/api/v1/jobs/?workspace=workspace_b").status_code,
        client.get("/api/v1/jobs/?status=queued&owner=bob").status_code,
        client.post(
            "/api/v1/instances/",
            {"workspace": "workspace_b", "name": "nb-on-postgres", "gpu": 1, "max_duration": 3600},
            format="json",
        ).status_code,
    ]
    compiled = {}
    for statement in (o for o in gc.get_objects() if isinstance(o, Statement)):
        kept = statement.kept(connections["default"])
        if kept:
            name = f"{statement.build.__module__}.{statement.build.__qualname__}"
            compiled[name] = [c is not None for c in kept.values()]
    print(json.dumps({"codes": codes, "compiled": compiled}))


if __name__ == "__main__":
    main()
