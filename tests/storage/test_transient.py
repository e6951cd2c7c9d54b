"""``is_transient`` judged against errors the databases really raise."""

import copy
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import DatabaseError, OperationalError, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from later_django.exceptions import InvalidArgument
from later_django.storage import Storage, is_transient

sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite only")
postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")

UPDATE = "UPDATE later_storage SET value = value WHERE namespace = 'test' AND key = %s"


def second_connection(**overrides: object) -> BaseDatabaseWrapper:
    """Open another Django connection to the test database, as another process would."""
    settings = copy.deepcopy(connection.settings_dict)
    options = overrides.pop("OPTIONS", {})
    settings.update(overrides)
    settings["OPTIONS"].update(options)
    return type(connections["default"])(settings, "default")


@pytest.fixture
def other() -> Iterator[BaseDatabaseWrapper]:
    wrapper = second_connection()
    yield wrapper
    wrapper.close()


def caught(run: object) -> DatabaseError:
    with pytest.raises(DatabaseError) as raised:
        run()  # type: ignore[operator]
    return raised.value


@sqlite_only
@pytest.mark.django_db
def test_sqlite_database_is_locked_is_transient(storage: Storage) -> None:
    storage.set("k", b"v")  # this test's open transaction now holds SQLite's write lock
    impatient = second_connection(OPTIONS={"timeout": 0})

    def write() -> None:
        with impatient.cursor() as cursor:
            cursor.execute("DELETE FROM later_storage")

    try:
        error = caught(write)
    finally:
        impatient.close()

    assert isinstance(error, OperationalError)
    assert "database is locked" in str(error)
    assert is_transient(error)


@postgres_only
@pytest.mark.django_db
def test_postgresql_lock_timeout_is_transient(other: BaseDatabaseWrapper) -> None:
    with connection.cursor() as cursor:
        cursor.execute("LOCK TABLE later_storage IN ACCESS EXCLUSIVE MODE")

    def read() -> None:
        with other.cursor() as cursor:
            cursor.execute("SET lock_timeout = '50ms'")
            cursor.execute("SELECT count(*) FROM later_storage")

    error = caught(read)

    assert error.__cause__.sqlstate == "55P03"  # type: ignore[union-attr]
    assert is_transient(error)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_postgresql_serialization_failure_is_transient(
    storage: Storage, other: BaseDatabaseWrapper
) -> None:
    storage.set("k", b"0")
    other.set_autocommit(False)
    with other.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cursor.execute("SELECT value FROM later_storage WHERE key = 'k'")
        storage.set("k", b"1")  # commits a newer version after the snapshot was taken
        error = caught(lambda: cursor.execute(UPDATE, ["k"]))
    other.rollback()

    assert error.__cause__.sqlstate == "40001"  # type: ignore[union-attr]
    assert is_transient(error)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_postgresql_deadlock_is_transient(storage: Storage) -> None:
    storage.set("a", b"0")
    storage.set("b", b"0")
    both_locked = threading.Barrier(2)
    errors: list[BaseException] = []

    def lock(first: str, second: str) -> None:
        wrapper = second_connection()
        try:
            wrapper.set_autocommit(False)
            with wrapper.cursor() as cursor:
                cursor.execute("SET deadlock_timeout = '100ms'")
                cursor.execute(UPDATE, [first])
                both_locked.wait(timeout=10)
                try:
                    cursor.execute(UPDATE, [second])
                except DatabaseError as error:
                    errors.append(error)
            wrapper.rollback()
        finally:
            wrapper.close()

    threads = [threading.Thread(target=lock, args=pair) for pair in [("a", "b"), ("b", "a")]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(errors) == 1
    assert errors[0].__cause__.sqlstate == "40P01"  # type: ignore[union-attr]
    assert is_transient(errors[0])


@postgres_only
@pytest.mark.django_db
def test_a_postgresql_connection_terminated_by_the_server_is_transient(
    other: BaseDatabaseWrapper,
) -> None:
    with other.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])

    def read() -> None:
        with other.cursor() as cursor:
            cursor.execute("SELECT 1")

    assert is_transient(caught(read))


@postgres_only
@pytest.mark.django_db
def test_a_session_ended_for_idling_in_a_transaction_is_transient(
    other: BaseDatabaseWrapper,
) -> None:
    with other.cursor() as cursor:
        cursor.execute("SET idle_in_transaction_session_timeout = '100ms'")
    other.set_autocommit(False)
    with other.cursor() as cursor:
        cursor.execute("SELECT 1")
    time.sleep(0.5)  # the server ends the session while it idles in its transaction

    def read() -> None:
        with other.cursor() as cursor:
            cursor.execute("SELECT 1")

    error = caught(read)
    assert error.__cause__.sqlstate == "25P03"  # type: ignore[union-attr]
    assert is_transient(error)


@postgres_only
@pytest.mark.django_db
def test_a_refused_postgresql_connection_is_transient() -> None:
    unreachable = second_connection(HOST="127.0.0.1", PORT="1")

    error = caught(unreachable.ensure_connection)

    assert isinstance(error, OperationalError)
    assert is_transient(error)


@pytest.mark.django_db
def test_a_unique_violation_is_not_transient(storage: Storage) -> None:
    storage.set("k", b"v")

    def insert_again() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO later_storage (namespace, key, value) VALUES ('test', 'k', %s)",
                [b"v"],
            )

    assert not is_transient(caught(insert_again))


@pytest.mark.django_db
def test_an_sql_error_is_not_transient() -> None:
    def query_missing_table() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT * FROM later_no_such_table")

    assert not is_transient(caught(query_missing_table))


def test_errors_that_are_not_database_errors_are_not_transient() -> None:
    assert not is_transient(InvalidArgument("limit is 0; it must be a positive int."))
    assert not is_transient(RuntimeError("database is locked"))
