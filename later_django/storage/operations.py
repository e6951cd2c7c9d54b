"""The mutations ``Storage.apply`` accepts; each checks its own fields when built."""

from __future__ import annotations

from dataclasses import dataclass

from ..exceptions import InvalidArgument
from .validation import check_key, check_member, check_ttl, check_value, show


@dataclass(frozen=True, slots=True)
class Set:
    """Store ``value`` under ``key``, replacing any value; ``ttl_seconds`` None never expires."""

    key: str
    value: bytes
    ttl_seconds: float | None = None

    def __post_init__(self) -> None:
        check_key("Set.key", self.key)
        check_value("Set.value", self.value)
        check_ttl("Set.ttl_seconds", self.ttl_seconds, optional=True)


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove the value under ``key``; deleting an absent key succeeds."""

    key: str

    def __post_init__(self) -> None:
        check_key("Delete.key", self.key)


@dataclass(frozen=True, slots=True)
class Expire:
    """Make an unexpired value expire ``ttl_seconds`` from now; an absent key stays absent."""

    key: str
    ttl_seconds: float

    def __post_init__(self) -> None:
        check_key("Expire.key", self.key)
        check_ttl("Expire.ttl_seconds", self.ttl_seconds, optional=False)


@dataclass(frozen=True, slots=True)
class RangeAdd:
    """Add ``member`` to the ordered range ``key``, or refresh its expiry if already present.

    A member that is present and unexpired keeps its cursor; an absent or
    expired one is appended with a new, higher cursor.
    """

    key: str
    member: str
    ttl_seconds: float | None = None

    def __post_init__(self) -> None:
        check_key("RangeAdd.key", self.key)
        check_member("RangeAdd.member", self.member)
        check_ttl("RangeAdd.ttl_seconds", self.ttl_seconds, optional=True)


@dataclass(frozen=True, slots=True)
class RangeRemove:
    """Remove ``member`` from the ordered range ``key``; removing an absent member succeeds."""

    key: str
    member: str

    def __post_init__(self) -> None:
        check_key("RangeRemove.key", self.key)
        check_member("RangeRemove.member", self.member)


Operation = Set | Delete | Expire | RangeAdd | RangeRemove
OPERATION_TYPES = (Set, Delete, Expire, RangeAdd, RangeRemove)


def check_operations(operations: object) -> list[Operation]:
    """Return ``operations`` as a list after checking every item is an operation.

    Fields were checked when each operation was built, so a batch that passes
    here cannot fail validation halfway through being written.
    """
    if isinstance(operations, str | bytes) or not hasattr(operations, "__iter__"):
        raise InvalidArgument(
            f"operations is {show(operations)}; it must be a sequence of "
            "Set, Delete, Expire, RangeAdd or RangeRemove."
        )
    checked = list(operations)
    for index, operation in enumerate(checked):
        if not isinstance(operation, OPERATION_TYPES):
            raise InvalidArgument(
                f"operations[{index}] is {show(operation)}; it must be a "
                "Set, Delete, Expire, RangeAdd or RangeRemove."
            )
    return checked
