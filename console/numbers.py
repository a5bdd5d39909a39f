"""Numbers as clients send them: parsed once, bounded by length and exponent before any use.

``Decimal("1e999000")`` is instant, but turning it into an int builds a million digits and
holds the GIL for ~26 s; past the decimal context's exponent range, arithmetic raises
Overflow (a 500) or silently rounds to zero. ``parse_number`` refuses such text by its length
and exponent alone, in microseconds, so every later step works on a few dozen digits at most.
The API's fields (console.api) and the pages' form fields below both parse through it.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms

# At most 24 characters: even times 1024 (GiB to MiB) that is exact in Decimal's 28 digits.
MAX_CHARS = 24
# Digits on each side of the decimal point; BIG, the largest amount a column takes, has 19.
MAX_DIGITS = 19
_LARGEST = 10**MAX_DIGITS
# The largest values the integer columns take: PositiveIntegerField is 32-bit on PostgreSQL;
# the 64-bit ones are kept to 2**62, as the API always has.
INT32 = 2**31 - 1
BIG = 2**62


class NumberError(ValueError):
    """A number refused before conversion; its message says why in a user's words."""

    def __init__(self, message: str, *, code: str = "bound") -> None:
        super().__init__(message)
        self.code = code  # "invalid" for what is no number at all, else "bound"


def parse_number(value: object) -> Decimal:
    """A JSON number or typed text as a Decimal of at most 19 digits each side of the point."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise NumberError("Enter a number.", code="invalid")
    if isinstance(value, int):
        if abs(value) >= _LARGEST:
            raise NumberError(f"Too large: at most {MAX_DIGITS} digits.")
        return Decimal(value)
    text = str(value).strip()
    if len(text) > MAX_CHARS:
        raise NumberError(f"Too long for a number: at most {MAX_CHARS} characters.")
    try:
        amount = Decimal(text)
    except InvalidOperation:
        raise NumberError("Enter a number.", code="invalid") from None
    if not amount.is_finite():
        raise NumberError("Enter a finite number.")
    if not amount:
        return Decimal(0)  # 0E+999999999 is zero, with an exponent no later step should see
    if amount.adjusted() >= MAX_DIGITS:
        raise NumberError(f"Too large: at most {MAX_DIGITS} digits before the decimal point.")
    if amount.adjusted() < -MAX_DIGITS:
        raise NumberError(f"Too fine: at most {MAX_DIGITS} digits after the decimal point.")
    return amount


def parse_whole(value: object) -> int:
    """A whole number (5, "5" or "5.0") through parse_number."""
    amount = parse_number(value)
    if amount != amount.to_integral_value():
        raise NumberError("Enter a whole number.", code="invalid")
    return int(amount)


def is_digits(text: str, *, most: int = 18) -> bool:
    """1 to `most` ASCII digits, which int() takes at once (str.isdigit() also takes "²")."""
    return text.isascii() and text.isdigit() and len(text) <= most


class NumberField(forms.DecimalField):
    """A form's decimal number, parsed by parse_number."""

    def to_python(self, value: Any) -> Decimal | None:  # type: ignore[override]
        """Empty is None; anything else goes through parse_number."""
        if value in self.empty_values:
            return None
        try:
            return parse_number(value)
        except NumberError as error:
            raise forms.ValidationError(str(error), code="invalid") from None


class WholeNumberField(forms.IntegerField):
    """A form's whole number, parsed by parse_whole; at most what a 32-bit column holds."""

    def __init__(self, *, max_value: int = INT32, **kwargs: Any) -> None:
        super().__init__(max_value=max_value, **kwargs)

    def to_python(self, value: Any) -> int | None:
        """Empty is None; anything else goes through parse_whole."""
        if value in self.empty_values:
            return None
        try:
            return parse_whole(value)
        except NumberError as error:
            raise forms.ValidationError(str(error), code="invalid") from None
