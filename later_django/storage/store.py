"""``Storage``: key-value state and ordered ranges of one namespace on one database alias."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import connections
from django.utils import timezone

from ..exceptions import InvalidArgument
from . import maintenance, reads, writes
from .operations import Delete, Expire, Operation, Set, check_operations
from .reads import RangeOrder, RangePage
from .validation import (
    check_cursor,
    check_key,
    check_namespace,
    check_order,
    check_page_limit,
    check_positive_int,
    check_ttl,
    check_value,
    show,
)

SUPPORTED_VENDORS = ("sqlite", "postgresql")


class Storage:
    """Durable key-value state and ordered ranges for one namespace.

    Every method runs on Django's connection for ``using``, so inside a
    caller's ``transaction.atomic(using=...)`` it commits or rolls back with
    the caller's work. A row whose ``date_expire`` has passed is absent to
    every read at once, before ``sweep_expired`` removes it. Instances hold
    no connection and may be shared between threads; each thread uses its own
    Django connection.
    """

    def __init__(self, namespace: str, using: str = "default") -> None:
        self.namespace = check_namespace(namespace)
        if using not in connections.settings:
            raise InvalidArgument(
                f"using is {show(using)}; it must be an alias in settings.DATABASES "
                f"({', '.join(map(repr, connections.settings))})."
            )
        vendor = connections[using].vendor
        if vendor not in SUPPORTED_VENDORS:
            raise InvalidArgument(
                f"using is {using!r}, a {vendor} database; it must be SQLite or PostgreSQL."
            )
        self.using = using

    def __repr__(self) -> str:
        return f"Storage(namespace={self.namespace!r}, using={self.using!r})"

    def get(self, key: str) -> bytes | None:
        """Return the unexpired value of ``key``, or None."""
        check_key("key", key)
        return reads.get_value(self.namespace, self.using, key, timezone.now())

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the unexpired values among ``keys``; absent and expired keys are left out.

        One query for up to 1000 distinct keys, one more for each further 1000.
        """
        wanted = [check_key(f"keys[{index}]", key) for index, key in enumerate(keys)]
        if not wanted:
            return {}
        return reads.get_values(self.namespace, self.using, wanted, timezone.now())

    def exists(self, key: str) -> bool:
        """Return whether ``key`` has an unexpired value."""
        check_key("key", key)
        return reads.value_exists(self.namespace, self.using, key, timezone.now())

    def apply(self, operations: Sequence[Operation]) -> None:
        """Apply ``operations`` in order, all or nothing.

        Raises InvalidArgument, before writing anything, if an item is not an
        operation. Inside a caller's atomic block the batch is a savepoint.
        """
        batch = check_operations(operations)
        if batch:
            writes.apply_operations(self.namespace, self.using, batch, timezone.now())

    def set(self, key: str, value: bytes, ttl_seconds: float | None = None) -> None:
        """Store ``value`` under ``key``; ``ttl_seconds`` None clears any expiry."""
        self.apply([Set(key, value, ttl_seconds)])

    def delete(self, key: str) -> None:
        """Remove ``key``'s value; an absent key is not an error."""
        self.apply([Delete(key)])

    def expire(self, key: str, ttl_seconds: float) -> None:
        """Make ``key``'s unexpired value expire ``ttl_seconds`` from now; absent stays absent."""
        self.apply([Expire(key, ttl_seconds)])

    def set_if_absent(self, key: str, value: bytes, ttl_seconds: float | None = None) -> bool:
        """Store ``value`` only if ``key`` has no unexpired value; return whether this call did.

        A single conditional upsert, so of two connections racing on one
        key exactly one gets True, and the loser leaves the value unchanged.
        An expired value counts as absent and is replaced.
        """
        check_key("key", key)
        check_value("value", value)
        check_ttl("ttl_seconds", ttl_seconds, optional=True)
        return writes.insert_if_absent(
            self.namespace, self.using, key, value, ttl_seconds, timezone.now()
        )

    def range_page(
        self,
        key: str,
        cursor: int | None = None,
        limit: int = 100,
        order: RangeOrder = "asc",
    ) -> RangePage:
        """Return up to ``limit`` unexpired members of range ``key`` after ``cursor``.

        ``cursor`` is exclusive: pass the previous page's ``next_cursor``.
        Members come in insertion (cursor) order, oldest first for "asc".
        Pagination is by keyset, so every page costs one bounded query.
        """
        check_key("key", key)
        check_cursor(cursor)
        check_page_limit(limit)
        check_order(order)
        return reads.range_page(
            self.namespace, self.using, key, cursor, limit, order, timezone.now()
        )

    def range_count(self, key: str) -> int:
        """Return how many unexpired members range ``key`` has."""
        check_key("key", key)
        return reads.range_count(self.namespace, self.using, key, timezone.now())

    def sweep_expired(self, limit: int) -> int:
        """Delete at most ``limit`` expired rows, oldest first, and return how many.

        Counts values and range members together, and sweeps every namespace
        of the database (expired rows are invisible to all of them). Call
        again while it returns ``limit`` to work through a backlog.
        """
        check_positive_int("limit", limit)
        return maintenance.sweep_expired(self.using, limit, timezone.now())

    def checkpoint_wal(self) -> None:
        """Checkpoint and truncate SQLite's write-ahead log; a no-op on PostgreSQL.

        Raises AutocommitRequired inside an atomic block.
        """
        maintenance.checkpoint_wal(self.using)

    def vacuum(self) -> None:
        """Run ``VACUUM`` (SQLite) or ``VACUUM (ANALYZE)`` on the later_* tables (PostgreSQL).

        Affects the whole database (SQLite) or every namespace's rows, not just
        this namespace. Raises AutocommitRequired inside an atomic block.
        """
        maintenance.vacuum(self.using)

    def database_size(self) -> int:
        """Return the on-disk bytes of the whole database, not only Later's tables."""
        return maintenance.database_size(self.using)
