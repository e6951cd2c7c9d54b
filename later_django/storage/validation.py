"""Argument checks shared by the storage layer; each failure is one InvalidArgument sentence."""

from __future__ import annotations

import reprlib
from typing import Any

from ..exceptions import InvalidArgument
from ..models.core import NAMESPACE_LENGTH

KEY_LENGTH = 255
MEMBER_LENGTH = 255
# Far enough for any retention; near enough that now + ttl never overflows a datetime.
MAX_TTL_SECONDS = 100 * 365.25 * 24 * 3600
MAX_PAGE_LIMIT = 1000
ORDERS = ("asc", "desc")

_repr = reprlib.Repr(maxstring=60, maxother=60, maxlist=6, maxdict=6)


def show(value: object) -> str:
    """Return ``repr(value)`` shortened so one message stays one readable line."""
    text = _repr.repr(value)
    if isinstance(value, str | bytes) and len(value) > 60:
        text += f" ({len(value)} {'characters' if isinstance(value, str) else 'bytes'})"
    return text


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_text(field: str, value: Any, max_length: int) -> str:
    """Return ``value`` if it is a usable key, member or namespace string."""
    if not isinstance(value, str) or not 0 < len(value) <= max_length or "\x00" in value:
        raise InvalidArgument(
            f"{field} is {show(value)}; it must be a non-empty str of at most "
            f"{max_length} characters without NUL."
        )
    return value


def check_namespace(value: Any) -> str:
    return check_text("namespace", value, NAMESPACE_LENGTH)


def check_key(field: str, value: Any) -> str:
    return check_text(field, value, KEY_LENGTH)


def check_member(field: str, value: Any) -> str:
    return check_text(field, value, MEMBER_LENGTH)


def check_value(field: str, value: Any) -> bytes:
    if not isinstance(value, bytes):
        raise InvalidArgument(f"{field} is {show(value)}; it must be bytes.")
    return value


def check_ttl(field: str, value: Any, *, optional: bool) -> float | None:
    """Return ``value`` if it is a usable time-to-live in seconds (or None when optional)."""
    if value is None and optional:
        return None
    # The range test also rejects NaN and infinities, and compares huge ints without overflow.
    if (_is_int(value) or isinstance(value, float)) and 0 <= value <= MAX_TTL_SECONDS:
        return float(value)
    allowed = f"a finite number of seconds from 0 to {MAX_TTL_SECONDS:.0f} (100 years)"
    raise InvalidArgument(
        f"{field} is {show(value)}; it must be {allowed}{', or None' if optional else ''}."
    )


def check_cursor(value: Any) -> int | None:
    if value is None or (_is_int(value) and value >= 0):
        return value
    raise InvalidArgument(f"cursor is {show(value)}; it must be a non-negative int or None.")


def check_page_limit(value: Any) -> int:
    if _is_int(value) and 1 <= value <= MAX_PAGE_LIMIT:
        return value
    raise InvalidArgument(f"limit is {show(value)}; it must be an int from 1 to {MAX_PAGE_LIMIT}.")


def check_order(value: Any) -> str:
    if isinstance(value, str) and value in ORDERS:
        return value
    raise InvalidArgument(f"order is {show(value)}; it must be 'asc' or 'desc'.")


def check_positive_int(field: str, value: Any) -> int:
    if _is_int(value) and value >= 1:
        return value
    raise InvalidArgument(f"{field} is {show(value)}; it must be a positive int.")
