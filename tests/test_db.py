"""``retrying``: transient errors retried, and the broken connection reset is the caller's alias."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from django.db import OperationalError, connection, connections

from later_django.db import retrying

postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PostgreSQL only: a server can end a session; an SQLite connection never breaks so",
)
ALIAS = "later_second"


def test_retrying_requires_the_database_alias_whose_connection_it_may_reset():
    with pytest.raises(TypeError, match="using"):
        retrying(lambda: 1, what="a read")  # type: ignore[call-arg]
    assert retrying(lambda: 1, what="a read", using="default") == 1


@pytest.fixture
def second_alias(db) -> Iterator[str]:
    """A second alias for the test database, as a project with two databases has.

    Registered as a connection only, not in the settings: Django's test case
    allows such dynamically created connections. It writes nothing.
    """
    wrapper = type(connections["default"])(copy.deepcopy(connection.settings_dict), ALIAS)
    connections[ALIAS] = wrapper
    yield ALIAS
    wrapper.close()
    del connections[ALIAS]


def _terminate(alias: str) -> None:
    """End the server session of ``alias``'s connection, as a restart or a failover does."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def _read(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone()[0]


@postgres_only
def test_a_broken_connection_is_reset_on_the_alias_given_and_only_there(second_alias):
    default_before = connection.connection
    _terminate(second_alias)
    # Resetting another alias leaves the broken one broken: every attempt fails.
    with pytest.raises(OperationalError):
        retrying(lambda: _read(second_alias), what="a read", using="default", attempts=3)
    assert retrying(lambda: _read(second_alias), what="a read", using=second_alias) == 1
    assert connection.connection is default_before  # the default connection was left alone
