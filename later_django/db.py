"""Small database helpers shared by the engine: dialects, datetimes, retries, wake-ups."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.utils import timezone
from django.utils.dateparse import parse_datetime

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "later_delivery"
CANCEL_CHANNEL = "later_cancel"  # a running job's cancel was requested (cancelling.py)
SUPPORTED = ("sqlite", "postgresql")


def connection_for(using: str) -> BaseDatabaseWrapper:
    connection = connections[using]
    if connection.vendor not in SUPPORTED:
        from .exceptions import LaterError

        raise LaterError(
            f"Database {using!r} is {connection.vendor!r}; later_django supports SQLite and "
            "PostgreSQL."
        )
    return connection


def is_postgres(connection: BaseDatabaseWrapper) -> bool:
    return connection.vendor == "postgresql"


def to_db(connection: BaseDatabaseWrapper, value: datetime | None) -> Any:
    """Adapt a datetime for a raw query, as Django's own fields store it."""
    if value is None:
        return None
    return connection.ops.adapt_datetimefield_value(django_time(value))


def from_db(value: Any) -> datetime | None:
    """Read a datetime column fetched by a raw query as Django's own fields return it."""
    if value is None:
        return None
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            raise ValueError(f"{value!r} is not a datetime")
        value = parsed
    if value.tzinfo is None and settings.USE_TZ:
        value = value.replace(tzinfo=UTC)  # SQLite holds UTC when USE_TZ is on
    return django_time(value)


def django_time(value: datetime) -> datetime:
    """``value`` as Django holds datetimes: aware with USE_TZ, naive local time without.

    With ``USE_TZ = False`` Django reads and writes naive datetimes in
    ``TIME_ZONE``, and so do the later tables (on PostgreSQL the session's zone
    is ``TIME_ZONE``); a naive value is taken as that local time. Job records
    hold microseconds since the epoch, the same under either setting.
    """
    if settings.USE_TZ:
        return value if timezone.is_aware(value) else timezone.make_aware(value)
    return timezone.make_naive(value) if timezone.is_aware(value) else value


def placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)


@contextmanager
def write_transaction(using: str, *, savepoint: bool = True, hot: bool = False) -> Iterator[Any]:
    """Open a transaction that holds the write lock from its first statement.

    On SQLite a deferred transaction that reads first and writes later fails at
    once with "database is locked" when another writer committed in between;
    taking the write lock up front lets the busy timeout do its job instead.

    Inside a caller's transaction the block is a savepoint, so an error raised
    in it (a refused retry, say) leaves the caller's transaction usable. Hot
    paths that raise nothing of their own pass ``savepoint=False`` to save the
    two round trips; ``hot=True`` yields a :func:`hot_cursor`.
    """
    connection = connection_for(using)
    outermost = not connection.in_atomic_block
    with (
        transaction.atomic(using=using, savepoint=savepoint),
        hot_cursor(using) if hot else connection.cursor() as cursor,
    ):
        if outermost and connection.vendor == "sqlite":
            cursor.execute("UPDATE later_stage_counts SET count = count WHERE 0")
        yield cursor


NEVER_BY_COUNT = 2**62


@cache
def _prepared_cursor_class() -> type:
    import psycopg

    class PreparedCursor(psycopg.Cursor):
        """Binds parameters on the server and prepares every statement it runs."""

        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(
                query, params, prepare=True if prepare is None else prepare, binary=binary
            )

    return PreparedCursor


@contextmanager
def hot_cursor(using: str) -> Iterator[Any]:
    """A cursor for the engine's hot statements: enqueue, claims and outcomes.

    Django binds parameters on the client and never prepares, so PostgreSQL
    parses and plans each of those large statements every time it runs, which
    costs more than running it. On PostgreSQL this cursor binds on the server
    and prepares each statement once per connection (``LATER_PREPARED_STATEMENTS
    = False`` turns preparing off, for poolers that cannot carry prepared
    statements). It runs in the connection's current transaction, and Django
    wraps its errors and logs its queries as for any other cursor.
    """
    with _hot_cursor(connection_for(using)) as cursor:
        yield cursor


def _hot_cursor(connection: BaseDatabaseWrapper) -> Any:
    """:func:`hot_cursor`'s cursor on ``connection``, for the caller to close."""
    if not is_postgres(connection):
        return connection.cursor()
    from .conf import later_settings

    connection.ensure_connection()
    connection.validate_thread_sharing()
    raw_connection = connection.connection
    if later_settings.prepared_statements:
        kind = _prepared_cursor_class()
        if raw_connection.prepare_threshold is None:
            # Django turns preparing off, and psycopg then ignores prepare=True. A
            # threshold no statement reaches lets ours (and only ours) be prepared.
            raw_connection.prepare_threshold = NEVER_BY_COUNT
    else:
        import psycopg

        kind = psycopg.Cursor
    raw = kind(raw_connection)
    if connection.queries_logged:
        return connection.make_debug_cursor(raw)
    return connection.make_cursor(raw)


class one_statement:
    """A hot cursor for a single statement that is atomic by itself.

    On PostgreSQL, outside any transaction, the statement runs in autocommit:
    it is its own transaction, one round trip instead of three (BEGIN, the
    statement, COMMIT); on SQLite it runs in a write transaction of its own.
    In a caller's transaction it runs there, without a savepoint: the statement
    must not be one a caller recovers from. An error then marks the caller's
    transaction for rollback, as an inner ``atomic(savepoint=False)`` would,
    without that block's bookkeeping: the statement is the one every
    ``enqueue()`` runs, and Django's own ``Model.save()`` goes the same way
    (``mark_for_rollback_on_error``).
    """

    __slots__ = ("_block", "_connection", "_cursor", "_using")

    def __init__(self, using: str) -> None:
        self._using = using

    def __enter__(self) -> Any:
        connection = self._connection = connection_for(self._using)
        if is_postgres(connection) or connection.in_atomic_block:
            self._block = None
            self._cursor = _hot_cursor(connection)
            return self._cursor.__enter__()
        self._block = write_transaction(self._using, savepoint=False, hot=True)
        return self._block.__enter__()

    def __exit__(self, kind: Any, error: Any, trace: Any) -> bool | None:
        if self._block is not None:
            return self._block.__exit__(kind, error, trace)
        if kind is not None and self._connection.in_atomic_block:
            self._connection.needs_rollback = True
            self._connection.rollback_exc = error  # type: ignore[attr-defined]  # not in the stubs
        return self._cursor.__exit__(kind, error, trace)


_engine_thread = threading.local()


def limit_idle_transactions(using: str, seconds: float | None) -> None:
    """Let PostgreSQL end this thread's session when one of its transactions idles past ``seconds``.

    For the worker's own threads (claiming, storing outcomes, the duties), whose
    transactions last milliseconds. A worker frozen in the middle of one
    (stopped with SIGSTOP, a paused VM, a debugger) would otherwise keep its row
    locks for as long as its connection stays open, which can be forever: the
    partition head it was renewing could then never be taken over, although its
    lease lapsed. Given the lease's length, the server frees such locks as the
    lease lapses. Task code runs in other threads and is never limited.

    It applies to the thread's current connection, unless that is inside a
    transaction the worker did not open, and to every connection the thread
    opens later on ``using``; ``None`` takes the limit off the thread. With
    ``LATER_LIMIT_IDLE_TRANSACTIONS = False`` (behind a transaction-pooling
    proxy, where a session setting would stay on a server connection that
    other clients use next) it does nothing.
    """
    from .conf import later_settings

    if not later_settings.limit_idle_transactions:
        return
    if seconds is None:
        _engine_thread.__dict__.pop(using, None)
    else:
        setattr(_engine_thread, using, seconds)
    connection = connections[using]
    if connection.connection is not None and not connection.in_atomic_block:
        _apply_idle_limit(connection, seconds)


def _apply_idle_limit(connection: BaseDatabaseWrapper, seconds: float | None) -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if seconds is None:
            cursor.execute("RESET idle_in_transaction_session_timeout")
        else:
            cursor.execute(
                "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
                [f"{max(1, round(seconds * 1000))}ms"],
            )


def _on_connection_created(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    seconds = getattr(_engine_thread, connection.alias, None)
    if seconds is not None:
        _apply_idle_limit(connection, seconds)


connection_created.connect(_on_connection_created, dispatch_uid="later_django.idle_limit")


def is_transient(exc: BaseException) -> bool:
    """Whether a database error is worth retrying (locks, deadlocks, lost connections)."""
    from .storage import is_transient as storage_is_transient

    return storage_is_transient(exc)


def retrying[T](fn: Callable[[], T], *, what: str, using: str, attempts: int = 8) -> T:
    """Run ``fn`` (one whole transaction), retrying transient database errors with jitter."""
    delay = 0.01
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except DatabaseError as e:
            if attempt == attempts or not is_transient(e):
                raise
            logger.warning(
                "transient database error during %s attempt=%s error=%s", what, attempt, e
            )
            if not connections[using].is_usable():
                connections[using].close()
            time.sleep(delay + random.uniform(0, delay))
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")
