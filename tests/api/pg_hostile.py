"""Send hostile input through the API and the pages on PostgreSQL; print the status codes.

Run by test_postgres.py in a fresh interpreter with DATABASE_URL set (a database of its own).
PostgreSQL, unlike SQLite, refuses NUL in text and integers past 32 bits in an integer column:
each of these answered 500 there.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.test")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402


def main() -> None:
    from console.demo import seed_demo

    assert connection.vendor == "postgresql", connection.vendor
    call_command("migrate", verbosity=0)
    demo = seed_demo()
    users = get_user_model().objects
    api = {}
    for name in ("bob", "admin"):
        client = APIClient(HTTP_HOST="127.0.0.1", raise_request_exception=False)
        token = Token.objects.get_or_create(user=users.get(username=name))[0].key
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        api[name] = client
    page = Client(HTTP_HOST="127.0.0.1", raise_request_exception=False)
    page.force_login(users.get(username="bob"))
    ws = demo.workspaces["workspace_b"].pk
    job = {"workspace": "workspace_b", "name": "hostile", "gpu": 1}
    form = {
        "name": "hostile",
        "quota": demo.quotas["Quota 1.1"].pk,
        "node_pool": demo.node_pool.pk,
        "gpu": "1",
        "cpu": "1",
        "memory": "1",
        "idle_stop_minutes": "",
    }
    job_form = {
        **form,
        "replicas": "1",
        "priority": "5",
        "idle_policy": "none",
        "max_restarts": "2",
        "restart_mode": "async",
    }
    codes = {
        "filter": api["bob"].get("/api/v1/jobs/?name=%00").status_code,
        "member path": api["bob"].get(f"/api/v1/workspaces/{ws}/members/%00/").status_code,
        "slug reference": api["bob"]
        .post("/api/v1/jobs/", {**job, "workspace": "workspace_b\x00"}, format="json")
        .status_code,
        "label key": api["admin"]
        .post(
            "/api/v1/node-pools/",
            {"name": "np", "resource_pool": "general", "label_selector": {"\x00": "v"}},
            format="json",
        )
        .status_code,
        "checkpoint minutes": page.post(
            "/workspaces/workspace_b/jobs/new/", {**job_form, "checkpoint_minutes": 10**12}
        ).status_code,
        "max hours": page.post(
            "/workspaces/workspace_b/instances/new/", {**form, "max_hours": "1000000"}
        ).status_code,
        "gpus × replicas": api["bob"]
        .post("/api/v1/jobs/", {**job, "replicas": 2**31 - 1}, format="json")
        .status_code,
        # A workload that passed the above would fail this sum for every quota reader.
        "quotas' pending usage": api["admin"].get("/api/v1/quotas/").status_code,
    }
    print(json.dumps({"codes": codes}))


if __name__ == "__main__":
    main()
