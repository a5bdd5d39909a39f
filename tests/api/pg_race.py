"""Race two quota scales through the API on PostgreSQL, each thread on its own connection.

Run by test_postgres.py in a fresh interpreter with DATABASE_URL set. Quota 1 (128 GPUs)
has children 1.1 at 48 and 1.2 at 72, so 8 GPUs are free: scaling 1.1 to 56 fits, scaling
1.2 to 80 fits, both together would need 136. Prints one JSON line per round.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.test")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402


def main(rounds: int) -> None:
    from django.contrib.auth import get_user_model

    from console.demo import seed_demo
    from quotas.models import Quota, QuotaResource

    assert connection.vendor == "postgresql", connection.vendor
    call_command("migrate", verbosity=0)
    demo = seed_demo()

    token = Token.objects.get_or_create(user=get_user_model().objects.get(username="admin"))[0]
    q11, q12 = demo.quotas["Quota 1.1"], demo.quotas["Quota 1.2"]
    for number in range(rounds):
        QuotaResource.objects.filter(quota=q11).update(min_gpu=48_000)
        QuotaResource.objects.filter(quota=q12).update(min_gpu=72_000)
        barrier = threading.Barrier(2)
        codes: dict[str, Any] = {}

        def scale(
            quota: Quota, gpus: int, barrier: threading.Barrier = barrier, codes: Any = codes
        ) -> None:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
            barrier.wait()
            response = client.post(
                f"/api/v1/quotas/{quota.pk}/scale/",
                {"resources": [{"node_pool": "A100-80G", "min": {"gpu": gpus}}]},
                format="json",
            )
            codes[quota.name] = [response.status_code, response.json()]
            connections.close_all()

        threads = [
            threading.Thread(target=scale, args=(q11, 56)),
            threading.Thread(target=scale, args=(q12, 80)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        total = sum(
            QuotaResource.objects.filter(quota__in=[q11, q12]).values_list("min_gpu", flat=True)
        )
        print(json.dumps({"round": number, "codes": codes, "children_min_gpu": total}))
        sys.stdout.flush()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
