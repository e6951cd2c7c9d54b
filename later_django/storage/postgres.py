"""PostgreSQL's maintenance statements: VACUUM (ANALYZE) and on-disk size."""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

TABLE_PREFIX = "later_"


def later_tables(connection: BaseDatabaseWrapper) -> list[str]:
    """Return the names of the ``later_*`` tables that exist in the current schema path."""
    with connection.cursor() as cursor:
        names = connection.introspection.table_names(cursor)
    return sorted(name for name in names if name.startswith(TABLE_PREFIX))


def vacuum(connection: BaseDatabaseWrapper) -> None:
    """Run ``VACUUM (ANALYZE)`` on every ``later_*`` table.

    Autovacuum normally keeps up; this lets an operator reclaim dead rows and
    refresh planner statistics right after a large sweep.
    """
    tables = later_tables(connection)
    if not tables:
        return
    quoted = ", ".join(connection.ops.quote_name(name) for name in tables)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {quoted}")


def database_size(connection: BaseDatabaseWrapper) -> int:
    """Return ``pg_database_size`` of the connected database: every table, not only Later's."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        (size,) = cursor.fetchone()
    return int(size)
