"""Schemathesis against the live schema: no generated input makes any endpoint answer 5xx.

Bounded: a few examples per operation, for a platform admin and for bob, in-process (WSGI)
inside the test's transaction, so every write is rolled back.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings

from tests.api.test_permissions import world  # noqa: F401  (the shared fixture)

pytestmark = pytest.mark.django_db
EXAMPLES = 6


@pytest.mark.parametrize("persona", ["admin", "bob"])
def test_no_generated_request_gets_a_server_error(
    api: Any,
    world: dict[str, Any],  # noqa: F811
    persona: str,
) -> None:
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=world["users"][persona])
    headers = {"Authorization": f"Token {token.key}"}
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application())
    failures: list[str] = []
    started = time.monotonic()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 40

    def check(case: Any) -> None:
        response = case.call(headers=headers)
        if response.status_code >= 500:
            failures.append(
                f"{case.operation.label}: {response.status_code} for "
                f"{case.path_parameters} {case.query} {case.body!r}"[:400]
            )

    for operation in operations:
        run = settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )(given(case=operation.as_strategy())(check))
        run()
    assert failures == []
    assert time.monotonic() - started < 60
