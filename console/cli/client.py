"""The CLI's HTTP side: the saved login, JSON over /api/v1/ with httpx, the API's errors.

Nothing here imports Django: the CLI is a client of a server that may run anywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx


class CLIError(Exception):
    """What the user is told before the command exits non-zero."""


def config_path() -> Path:
    """Where the URL and token are kept (TIDEPOOL_CONFIG overrides it)."""
    override = os.environ.get("TIDEPOOL_CONFIG")
    if override:
        return Path(override)
    return Path.home() / ".config" / "tidepool" / "config.json"


def load_config() -> dict[str, str]:
    """The saved URL and token; an error when not logged in."""
    path = config_path()
    if not path.exists():
        raise CLIError("Not logged in: run `tidepool login URL` first.")
    data: dict[str, str] = json.loads(path.read_text())
    return data


def save_config(data: dict[str, str]) -> None:
    """Save the URL and token, readable by the user only."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    path.chmod(0o600)


def error_message(body: Any) -> str:
    """The API's error as one line per field: ``gpu: …`` (``detail`` and non-field alone)."""
    if isinstance(body, dict):
        if "detail" in body and len(body) == 1:
            return str(body["detail"])
        lines = []
        for key, value in body.items():
            messages = value if isinstance(value, list) else [value]
            for message in messages:
                text = error_message(message) if isinstance(message, dict) else str(message)
                lines.append(text if key in ("non_field_errors", "detail") else f"{key}: {text}")
        return "\n".join(lines)
    if isinstance(body, list):
        return "\n".join(error_message(item) for item in body)
    return str(body)


class Client:
    """JSON over HTTP to /api/v1/ with the saved token."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30) -> None:
        self.url = url.rstrip("/")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Token {token}"
        self.http = httpx.Client(base_url=self.url + "/api/v1/", headers=headers, timeout=timeout)

    @classmethod
    def from_config(cls) -> Client:
        """A client for the server and token `tidepool login` saved."""
        config = load_config()
        return cls(config["url"], config.get("token"))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Send one request; raise CLIError with the API's message on 4xx/5xx."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self.http.request(
                method, path, json=body, params=query or None, headers=headers
            )
        except httpx.HTTPError as err:
            raise CLIError(f"Cannot reach {self.url}: {err}") from None
        if response.is_error:
            try:
                detail = error_message(response.json())
            except ValueError:
                detail = response.text[:300] or response.reason_phrase
            raise CLIError(f"{detail} (HTTP {response.status_code})")
        return response

    def get(self, path: str, **params: Any) -> Any:
        """GET and return the JSON body."""
        return self.request("GET", path, params=params).json()

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        """POST JSON and return the JSON body."""
        return self.request("POST", path, body, **kwargs).json()

    def patch(self, path: str, body: Any, **kwargs: Any) -> Any:
        """PATCH JSON and return the JSON body."""
        return self.request("PATCH", path, body, **kwargs).json()

    def delete(self, path: str) -> None:
        """DELETE (the API answers 204)."""
        self.request("DELETE", path)

    def all(self, path: str, **params: Any) -> list[dict[str, Any]]:
        """Every row of a paginated list."""
        page = self.get(path, **params)
        rows = list(page["results"])
        while page.get("next"):
            page = self.request("GET", page["next"]).json()
            rows.extend(page["results"])
        return rows

    def one(self, path: str, what: str, name: str, **params: Any) -> dict[str, Any]:
        """The single row named `name` (by the list's ``name`` filter)."""
        rows = self.all(path, name=name, **params)
        if not rows:
            raise CLIError(f"No {what} named {name!r}.")
        if len(rows) > 1:
            places = ", ".join(sorted(str(r.get("workspace")) for r in rows))
            raise CLIError(f"Several {what}s are named {name!r} ({places}): add --workspace.")
        return rows[0]


def complete_names(path: str) -> Any:
    """A shell-completion callback offering the names the server lists at `path`.

    Completion must never fail the shell: not logged in, or the server away, offers nothing.
    """

    def complete(ctx: Any, param: Any, incomplete: str) -> list[str]:
        try:
            client = Client.from_config()
            client.http.timeout = httpx.Timeout(3)
            rows = client.all(path)
        except (CLIError, httpx.HTTPError, OSError, ValueError, KeyError):
            return []
        names = sorted({str(row["name"]) for row in rows})
        return [name for name in names if name.startswith(incomplete)]

    return complete
