"""A database outage answers 503 with Retry-After: JSON from the API, the 503 page for pages.

The SQLite database is made unreachable by pointing the connection at a file in a directory
that does not exist (it cannot be opened, even by root), with the test database's own
connection set aside and put back afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.outage import RETRY_AFTER_SECONDS, is_outage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def unreachable_database(tmp_path: Path) -> Iterator[None]:
    """The default database cannot be opened until the test ends."""
    connection = connections["default"]
    saved_name, saved = connection.settings_dict["NAME"], connection.connection
    connection.connection = None  # the next query connects, and fails
    connection.settings_dict["NAME"] = str(tmp_path / "gone" / "db.sqlite3")
    try:
        yield
    finally:
        if connection.connection is not None:
            connection.connection.close()
        connection.settings_dict["NAME"] = saved_name
        connection.connection = saved


def test_the_api_answers_503_json_when_the_database_is_down(
    admin: Any, unreachable_database: None
) -> None:
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef0123456789abcdef01234567")
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert "database cannot be reached" in response.json()["detail"]


def test_a_signed_in_api_write_answers_503_json(admin: Any, tmp_path: Path) -> None:
    token = Token.objects.create(user=admin)
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    connection = connections["default"]
    saved_name, saved = connection.settings_dict["NAME"], connection.connection
    connection.connection = None
    connection.settings_dict["NAME"] = str(tmp_path / "gone" / "db.sqlite3")
    try:
        response = client.post("/api/v1/workspaces/", {"name": "team-d"}, format="json")
    finally:
        connection.settings_dict["NAME"] = saved_name
        connection.connection = saved
    assert response.status_code == 503 and response["Retry-After"]
    assert set(response.json()) == {"detail"}


def test_pages_show_the_503_page_when_the_database_is_down(
    admin: Any, unreachable_database: None
) -> None:
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "abcdefghijklmnopqrstuvwxyz012345"
    response = client.get("/workspaces/")
    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response["Content-Type"].startswith("text/html")
    assert b"Tidepool is unavailable" in response.content


def test_other_server_errors_stay_500() -> None:
    assert not is_outage(ValueError("a bug"))
    from django.db import OperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError

    assert is_outage(OperationalError("unable to open database file"))
    assert is_outage(RedisConnectionError("Connection refused"))
    try:
        try:
            raise RedisConnectionError("down")
        except RedisConnectionError as error:
            raise RuntimeError("wrapped") from error
    except RuntimeError as wrapped:
        assert is_outage(wrapped)
