"""Lower a workspace's cap while an instance submit in it is still open, on PostgreSQL.

Run by test_postgres.py in a fresh interpreter with DATABASE_URL set. The submit asks for
ten years and holds its transaction open; the admin's cap must wait for it and then shorten
the new instance too (else it would run ten years under an 8 h cap). Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.test")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, connections, transaction  # noqa: E402


def main() -> None:
    from django.contrib.auth import get_user_model

    from console.demo import seed_demo
    from jobs.models import Workload
    from jobs.services.workloads import Shape, instance_start
    from workspaces.services import workspace_instance_limits_set

    assert connection.vendor == "postgresql", connection.vendor
    call_command("migrate", verbosity=0)
    demo = seed_demo()
    users = get_user_model().objects
    carol, admin = users.get(username="carol"), users.get(username="admin")
    workspace = demo.workspaces["workspace_c"]
    submitted, release = threading.Event(), threading.Event()
    result: dict[str, Any] = {}

    def submit() -> None:
        with transaction.atomic():
            instance_start(
                actor=carol,
                workspace=workspace,
                quota=demo.quotas["Quota 1.2"],
                name="forever",
                shape=Shape(replicas=1, gpu=1000),
                node_pools=[demo.node_pool],
                max_duration=87600 * 3600,
            )
            submitted.set()
            release.wait(30)
        connections.close_all()

    def lower() -> None:
        submitted.wait(30)
        saved = workspace_instance_limits_set(
            actor=admin, workspace=workspace, max_duration=8 * 3600
        )
        result["shortened"] = [w.name for w in saved.shortened]
        connections.close_all()

    submitter, admin_thread = threading.Thread(target=submit), threading.Thread(target=lower)
    submitter.start()
    admin_thread.start()
    submitted.wait(30)
    # The cap waits for the open submit: a lock request not granted shows in pg_locks.
    deadline = time.monotonic() + 10
    waiting = False
    while admin_thread.is_alive() and time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
            if cursor.fetchone()[0]:
                waiting = True
                break
        time.sleep(0.01)
    release.set()
    submitter.join(30)
    admin_thread.join(30)
    instance = Workload.objects.get(name="forever")
    events = list(instance.events.values_list("kind", flat=True).order_by("id"))
    print(
        json.dumps(
            {
                "waited": waiting,
                "shortened": result.get("shortened"),
                "max_duration": instance.max_duration,
                "events": events,
            }
        )
    )


if __name__ == "__main__":
    main()
