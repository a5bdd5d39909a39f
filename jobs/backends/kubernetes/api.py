"""Every API call goes through `Api.call`: a client-side rate limit, retries, one error type.

- A token bucket (QPS and burst, client-go's 5/10 by default) paces every call, the watch's
  included, so a control loop never floods the API server.
- 429 waits the server's `Retry-After`; 5xx and network errors back off exponentially with
  jitter; after `retries` tries the call raises `ApiError` (transient).
- Every other refusal raises `ApiError` at once, and `kind` says what it means to a replica
  (errors.py).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from jobs.backends.kubernetes.errors import ApiError

NETWORK_ERRORS = (urllib3.exceptions.HTTPError, OSError)
# No single wait of a retry is longer than this, whatever the server asks.
MAX_WAIT_SECONDS = 30.0


class RateLimiter:
    """A token bucket: `qps` tokens a second, at most `burst` saved up."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps, self.burst, self.clock = qps, burst, clock
        self.tokens = float(burst)
        self.at = clock()
        self.lock = threading.Lock()

    def delay(self) -> float:
        """Take a token; the seconds to wait before using it."""
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.qps)
            self.at = now
            self.tokens -= 1
            return 0.0 if self.tokens >= 0 else -self.tokens / self.qps

    def take(self) -> None:
        """Wait for a token."""
        wait = self.delay()
        if wait > 0:
            time.sleep(wait)


def _retry_after(e: ApiException) -> float | None:
    """The server's Retry-After, in seconds, if it sent one."""
    value = (e.headers or {}).get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def error_of(e: ApiException) -> ApiError:
    """The API's refusal as an ApiError, with the server's own message."""
    try:
        body = json.loads(e.body or "")
        message, reason = str(body["message"]), str(body.get("reason") or "")
    except (TypeError, ValueError, KeyError):
        message, reason = f"{e.status} {e.reason}".strip(), ""
    return ApiError(int(e.status or 0), message, reason=reason)


@dataclass
class Api:
    """The call wrapper the backend uses for the API server."""

    core: Any  # kubernetes.client.CoreV1Api
    limiter: RateLimiter
    retries: int = 4
    backoff_seconds: float = 0.5
    request_seconds: float = 30.0
    calls: int = 0  # every request sent (for the steady-state figure)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`core.<method>(...)` paced and retried; the raw JSON answer, or ApiError."""
        kwargs.setdefault("_preload_content", False)
        kwargs.setdefault("_request_timeout", self.request_seconds)
        for attempt in range(self.retries):
            last = attempt == self.retries - 1
            self.limiter.take()
            self.calls += 1
            try:
                response = getattr(self.core, method)(*args, **kwargs)
            except ApiException as e:
                error = error_of(e)
                if not error.transient or last:
                    raise error from e
                wait = _retry_after(e) if e.status == 429 else None
                self._wait(attempt, wait)
                continue
            except NETWORK_ERRORS as e:
                if last:
                    raise ApiError(0, f"the API server did not answer ({e})") from e
                self._wait(attempt, None)
                continue
            return response
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def json(self, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """`call`, with the answer's JSON body."""
        data: dict[str, Any] = json.loads(self.call(method, *args, **kwargs).data)
        return data

    def _wait(self, attempt: int, retry_after: float | None) -> None:
        """Sleep before the next try: what the server asked, or backoff with jitter."""
        if retry_after is None:
            retry_after = self.backoff_seconds * (2**attempt) * random.uniform(0.5, 1.5)
        time.sleep(min(retry_after, MAX_WAIT_SECONDS))
