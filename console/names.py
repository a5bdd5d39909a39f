"""The one rule for names, used by the forms, the API and the services.

- **Workload names** (jobs, services, instances) and **scaling rule names** are DNS labels, as
  Kubernetes names pods after them: lower-case letters, digits and ``-``, starting and ending
  with a letter or digit, at most 63 characters (``resnet50-0001``, ``chat-api``).
- **Display names** (quotas such as ``Quota 1.1``, workspaces) may hold spaces and capitals,
  but no control character, no invisible formatting character (bidirectional overrides such
  as U+202E, which make a name read as another, zero-width spaces) and no leading or trailing
  space. Workspaces also keep their slug rule (letters, digits, ``-`` and ``_``), since their
  names are in URLs.

A name that breaks the rule is refused with a message naming the field, never silently
trimmed: what is stored is what the client sent.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from django.core.exceptions import ValidationError

from console.errors import DomainError

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MAX = 63
SLUG = re.compile(r"[-a-zA-Z0-9_]+")
# Unicode categories refused anywhere in a name: controls (Cc), invisible formatting
# characters, bidirectional overrides among them (Cf), line and paragraph separators.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _refused_character(name: str) -> str | None:
    """The first control or invisible formatting character of `name`, as U+XXXX."""
    for char in name:
        if unicodedata.category(char) in REFUSED_CATEGORIES:
            return f"U+{ord(char):04X}"
    return None


def check_display_name(name: str, *, field: str = "name", what: str = "name") -> str:
    """A display name: not empty, no control or formatting character, no edge spaces."""
    if not name.strip():
        raise DomainError(f"Give a {what}.", field=field)
    bad = _refused_character(name)
    if bad is not None:
        raise DomainError(
            f"The {what} holds the control or formatting character {bad}; remove it.",
            field=field,
        )
    if name != name.strip():
        message = f"The {what} {name!r} starts or ends with a space; remove it."
        raise DomainError(message, field=field)
    return name


def check_dns_name(name: str, *, field: str = "name", what: str = "name") -> str:
    """A DNS-label name: lower-case letters, digits and -, at most 63 characters."""
    check_display_name(name, field=field, what=what)
    if len(name) > DNS_LABEL_MAX:
        raise DomainError(
            f"The {what} has {len(name)} characters; at most {DNS_LABEL_MAX} are allowed.",
            field=field,
        )
    if not DNS_LABEL.fullmatch(name):
        raise DomainError(
            f"The {what} {name!r} may hold only lower-case letters, digits and -, and must "
            "start and end with a letter or digit (like resnet50-0001).",
            field=field,
        )
    return name


def check_slug_name(name: str, *, field: str = "name", what: str = "name") -> str:
    """A display name that is also a URL slug: letters, digits, - and _."""
    check_display_name(name, field=field, what=what)
    if not SLUG.fullmatch(name):
        message = f"The {what} {name!r} may hold only letters, digits, - and _."
        raise DomainError(message, field=field)
    return name


def validator(check: Callable[..., str], what: str) -> Callable[[str], None]:
    """`check` as a Django validator, for form and serializer fields (DRF takes them too)."""

    def validate(value: str) -> None:
        try:
            check(value, what=what)
        except DomainError as error:
            raise ValidationError(error.message, code="invalid_name") from None

    validate.__name__ = f"validate_{check.__name__.removeprefix('check_')}"
    return validate


workload_name = validator(check_dns_name, "workload name")
rule_name = validator(check_dns_name, "rule name")
quota_name = validator(check_display_name, "quota name")
workspace_name = validator(check_slug_name, "workspace name")
