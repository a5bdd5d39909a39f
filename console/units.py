"""Conversions between what people type (GPUs, may be fractional) and integer milli-GPUs."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

MILLI = 1000


def gpus_to_milli(value: object, *, field: str = "gpu") -> int:
    """Turn a GPU count such as 0.5 or "56" into milli-GPUs, refusing finer than 1/1000."""
    from console.errors import DomainError

    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise DomainError(f"{value!r} is not a number of GPUs.", field=field) from None
    if not amount.is_finite() or amount < 0:
        raise DomainError(
            f"{value} is not a valid number of GPUs (must be 0 or more).", field=field
        )
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
