"""The API's JSON parser: DRF's, bounded in depth, refusing NUL in any string.

DRF's parser let 100,000 nested ``[`` raise RecursionError (a 500), and strings holding NUL
reached PostgreSQL, which refuses them in text ("A string literal cannot contain NUL (0x00)
characters"), also a 500. (The body's size is bounded already: DRF reads it through
``request.body``, which refuses more than DATA_UPLOAD_MAX_MEMORY_SIZE with a 400.) A module of
its own: REST_FRAMEWORK names it, and DRF's views load it while console.api imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import exceptions, parsers
from rest_framework.settings import api_settings

# Our bodies nest four levels at most (resources → node pool → min → gpu).
MAX_DEPTH = 32
NUL_MESSAGE = "Null characters are not allowed."  # DRF's CharField says the same
DEEP_MESSAGE = f"JSON parse error - nested deeper than {MAX_DEPTH} levels."


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; 400 for a body nested too deep or a NUL in a string."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        """Parse as DRF does, then check every value."""
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError(DEEP_MESSAGE) from None
        check_values(data)
        return data


def check_values(data: Any) -> None:
    """Refuse nesting deeper than MAX_DEPTH, and NUL in any key or string (naming the field)."""
    # A loop, not recursion: the walk itself must not be what a deep body breaks.
    stack: list[tuple[Any, int, str]] = [(data, 0, api_settings.NON_FIELD_ERRORS_KEY)]
    while stack:
        value, depth, field = stack.pop()
        if depth > MAX_DEPTH:
            raise exceptions.ParseError(DEEP_MESSAGE)
        if isinstance(value, str):
            if "\x00" in value:
                raise exceptions.ValidationError({field: [NUL_MESSAGE]})
        elif isinstance(value, dict):
            for key, item in value.items():
                if "\x00" in key:
                    raise exceptions.ValidationError({field: [NUL_MESSAGE]})
                stack.append((item, depth + 1, key if depth == 0 else field))
        elif isinstance(value, list):
            stack.extend((item, depth + 1, field) for item in value)
