"""Schemathesis against the live schema: every generated request gets an answer the schema
documents (response-schema conformance), and none a 5xx.

Bounded: a few examples per operation, for a platform admin and for bob, in-process (WSGI)
inside the test's transaction, so every write is rolled back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.api.test_permissions import world  # noqa: F401  (the shared fixture)

pytestmark = pytest.mark.django_db
EXAMPLES = 6
CHECKS = [not_a_server_error, response_schema_conformance]


@pytest.fixture
def connection_kept() -> Iterator[None]:
    """The WSGI handler closes the database connection as a request starts and ends, which
    would end the test's transaction: keep it, as Django's test client does."""
    for signal in (signals.request_started, signals.request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (signals.request_started, signals.request_finished):
        signal.connect(close_old_connections)


@pytest.mark.parametrize("persona", ["admin", "bob"])
def test_generated_requests_get_answers_the_schema_documents(
    api: Any,
    world: dict[str, Any],  # noqa: F811
    persona: str,
    connection_kept: None,
) -> None:
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=world["users"][persona])
    headers = {"Authorization": f"Token {token.key}"}
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application())
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 40
    examples = 0

    def check(case: Any) -> None:
        nonlocal examples
        examples += 1
        response = case.call(headers=headers)
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (Exception, BaseExceptionGroup) as error:  # noqa: B902  (FailureGroup)
            found = [line.strip() for line in str(error).splitlines() if line.strip()][:4]
            failures.append(
                f"{case.operation.label}: {response.status_code} for "
                f"{case.path_parameters} {case.query} {case.body!r}: {found}"[:700]
            )

    for operation in operations:
        run = settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )(given(case=operation.as_strategy())(check))
        run()
    print(f"schemathesis as {persona}: {examples} examples, {len(failures)} failures")
    assert failures == [], "\n".join(failures)
