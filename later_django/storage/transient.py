"""Which database errors are worth retrying: lock contention and lost connections."""

from __future__ import annotations

import sqlite3
import sys

from django.db import InterfaceError as DjangoInterfaceError

# serialization_failure, deadlock_detected, lock_not_available, the server going away
# (admin_shutdown, crash_shutdown, cannot_connect_now), and a session ended for idling
# in a transaction (idle_in_transaction_session_timeout: a worker frozen mid-transaction).
TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "25P03"})
CONNECTION_SQLSTATE_CLASS = "08"
SQLITE_TRANSIENT_MESSAGES = ("database is locked", "database table is locked")

# Longer chains mean something unrelated re-raised the error; stop rather than loop.
MAX_CHAIN = 8


def is_transient(exc: BaseException) -> bool:
    """Return whether ``exc`` is a database error that the same work may survive on retry.

    True for SQLite's "database is locked" and "database table is locked", PostgreSQL's
    serialization failures (40001), deadlocks (40P01), lock timeouts (55P03),
    sessions ended for idling in a transaction (25P03) and lost or refused
    connections; False for everything else, including
    constraint violations and SQL errors that would fail again. Django's
    wrapped exceptions are judged by the driver error they were raised from.
    """
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < MAX_CHAIN:
        if _is_transient_one(current):
            return True
        current = current.__cause__
        seen += 1
    return False


def _is_transient_one(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        message = str(exc).lower()
        return any(text in message for text in SQLITE_TRANSIENT_MESSAGES)
    if isinstance(exc, DjangoInterfaceError):
        # Django raises it for a connection that was closed under it.
        return True
    # Only a process that imported psycopg (one that uses PostgreSQL) can hold its errors;
    # importing it with this module cost every process on SQLite about 70 ms at start.
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.Error):
        sqlstate = exc.sqlstate
        if sqlstate is None:
            # Client-side failures with no server code: the connection broke or never opened.
            return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
        return sqlstate in TRANSIENT_SQLSTATES or sqlstate.startswith(CONNECTION_SQLSTATE_CLASS)
    return False
