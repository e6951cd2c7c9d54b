"""Which databases hold Later's tables, and a database router that keeps them there.

Later's tables belong on the databases its backend aliases name in
``TASKS[alias]["OPTIONS"]["database"]`` (``default`` unless said otherwise).
Without a router, Django's ``migrate --database=X`` creates every installed
app's tables on X, Later's included. ``LaterRouter`` in ``DATABASE_ROUTERS``
stops that: Later's migrations then do nothing on any other database, and
ORM reads and writes of Later's models that name no database (the admin's
changelists) go to Later's.

The migrations' hand-written SQL (triggers, the ``has_children`` backfill)
asks :func:`runs_engine_sql` whether to run, so that even without the router
``migrate`` does not fail on a database Later does not use.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import BaseDatabaseWrapper

from .db import SUPPORTED
from .options import configured_databases

APP_LABEL = "later"


def later_databases() -> list[str]:
    """The ``DATABASES`` aliases Later's backends use, read from ``settings.TASKS`` now."""
    return configured_databases()


class LaterRouter:
    """Keep the ``later`` app's tables and queries on the databases Later uses.

    Add ``"later_django.routers.LaterRouter"`` to ``DATABASE_ROUTERS``. It has
    no opinion on any other app, so routers listed after it decide for those.
    """

    def db_for_read(self, model: type, **hints: Any) -> str | None:
        if model._meta.app_label != APP_LABEL:  # type: ignore[attr-defined]
            return None
        databases = later_databases()
        instance = hints.get("instance")
        current = getattr(getattr(instance, "_state", None), "db", None)
        return current if current in databases else databases[0]

    db_for_write = db_for_read

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        if app_label != APP_LABEL:
            return None
        return db in later_databases()


def runs_engine_sql(connection: BaseDatabaseWrapper) -> bool:
    """Whether a Later migration's SQL for SQLite or PostgreSQL runs on ``connection``.

    It runs wherever Django created Later's tables on one of those two, so that
    the tables are whole there. On a database of another kind it is skipped
    when no Later backend uses that database (its Later tables, created only
    because no router said otherwise, are never used), and refused when one
    does, since Later cannot work there.
    """
    if connection.vendor in SUPPORTED:
        return True
    if connection.alias in later_databases():
        raise ImproperlyConfigured(
            f"Database {connection.alias!r} is {connection.vendor!r}, and a Later backend in "
            f"TASKS keeps its jobs there (OPTIONS['database']); later_django supports SQLite "
            "and PostgreSQL. Point OPTIONS['database'] at a SQLite or PostgreSQL database."
        )
    return False
