"""The one domain error that services raise; forms and the API show it on its field."""

from __future__ import annotations


class DomainError(Exception):
    """A refused change: names the field it concerns and the reason, with the numbers."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


class NameTaken(DomainError):
    """A name already in use where it must be unique: the API answers 409 Conflict."""
