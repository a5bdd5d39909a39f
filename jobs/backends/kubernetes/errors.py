"""What an API refusal means for a replica: wait with a reason, adopt, refuse, or retry."""

from __future__ import annotations

from enum import Enum


class Meaning(Enum):
    """How the backend answers one kind of refusal."""

    # ResourceQuota, Pod Security, RBAC, a missing or terminating namespace: the replica waits
    # with the reason shown; a person (or the quota freeing up) fixes it.
    HOLD = "hold"
    CONFLICT = "conflict"  # 409: the object exists (adopt it) or changed (re-read)
    REFUSED = "refused"  # 400/422: the body is invalid; asking again cannot help
    GONE = "gone"  # 410: a resourceVersion or continue token too old: list again
    NOT_FOUND = "not_found"  # 404 of the object itself
    TRANSIENT = "transient"  # 429, 5xx, no answer: retried with backoff, then later


class ApiError(Exception):
    """A refusal of the API server, with its own message and what it means."""

    def __init__(self, status: int, message: str, *, reason: str = "") -> None:
        super().__init__(f"{status} {message}")
        self.status, self.message, self.reason = status, message, reason

    @property
    def transient(self) -> bool:
        """Asking again later may succeed by itself."""
        return self.status in (0, 429) or self.status >= 500

    def meaning(self, *, creating: bool = False) -> Meaning:
        """What this refusal means; a 404 on create is a missing namespace (hold)."""
        if self.transient:
            return Meaning.TRANSIENT
        if self.status == 403 or (self.status == 404 and creating):
            return Meaning.HOLD
        if self.status == 404:
            return Meaning.NOT_FOUND
        if self.status == 409:
            return Meaning.CONFLICT
        if self.status == 410:
            return Meaning.GONE
        return Meaning.REFUSED
