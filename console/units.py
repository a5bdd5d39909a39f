"""Conversions between what people type or read and the integers kept: milli-GPUs, seconds."""

from __future__ import annotations

from decimal import Decimal

from console.errors import DomainError
from console.numbers import NumberError, parse_number

MILLI = 1000
# The most GPUs one amount may name: a million GPUs is 10**9 milli-GPUs, which still fits the
# 32-bit columns (a workload's GPUs per replica) and leaves room in the 64-bit ones.
MAX_GPUS = 1_000_000


def gpus_to_milli(value: object, *, field: str = "gpu") -> int:
    """Turn a GPU count such as 0.5 or "56" into milli-GPUs, refusing finer than 1/1000."""
    try:
        amount = parse_number(value)
    except NumberError as error:
        if error.code != "invalid":
            raise DomainError(str(error), field=field) from None
        shown = repr(value) if isinstance(value, str | bool) else "That"
        raise DomainError(f"{shown} is not a number of GPUs.", field=field) from None
    if amount < 0:
        raise DomainError(
            f"{value} is not a valid number of GPUs (must be 0 or more).", field=field
        )
    if amount > MAX_GPUS:
        raise DomainError(f"{value} GPUs is more than {MAX_GPUS:,}.", field=field)
    milli = amount * MILLI
    if milli != milli.to_integral_value():
        raise DomainError(f"{value} GPUs is finer than 1/1000 of a GPU.", field=field)
    return int(milli)


def milli_to_gpus(milli: int | None) -> str:
    """Format milli-GPUs as a GPU count without needless decimals: 48000 → "48", 500 → "0.5"."""
    if milli is None:
        return "∞"
    value = Decimal(milli) / MILLI
    text = format(value.normalize(), "f")
    return text


def called(name: str) -> str:
    """How a message names a quota: "Quota team-a", but "Quota 1", not "Quota Quota 1"."""
    return name if name.lower().startswith("quota") else f"Quota {name}"


def duration_text(seconds: int) -> str:
    """A duration the way a person writes it: 2 h, 90 min, 1 h 30 min, 45 s."""
    if seconds % 60:
        return f"{seconds} s"
    minutes = seconds // 60
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h" + (f" {rest} min" if rest else "")
