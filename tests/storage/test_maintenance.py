import os
from collections.abc import Iterator

import pytest
from django.db import connection, transaction

from later_django.exceptions import LaterError
from later_django.storage import AutocommitRequired, Set, Storage

sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite only")
postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")


def fill(storage: Storage, megabytes: int, prefix: str = "blob") -> None:
    """Write ``megabytes`` of incompressible values, so neither dialect can shrink them."""
    storage.apply([Set(f"{prefix}{n}", os.urandom(64 * 1024)) for n in range(megabytes * 16)])


def wal_path() -> str:
    return f"{connection.settings_dict['NAME']}-wal"


@pytest.fixture
def wal_mode() -> Iterator[None]:
    """Put the test database in WAL mode for one test, then back in rollback-journal mode."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode=WAL")
        assert cursor.fetchone()[0] == "wal"
    yield
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode=DELETE")


@sqlite_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("wal_mode")
def test_checkpoint_wal_truncates_the_sqlite_write_ahead_log(storage: Storage) -> None:
    fill(storage, 2)
    assert os.path.getsize(wal_path()) > 1024 * 1024

    storage.checkpoint_wal()

    assert os.path.getsize(wal_path()) == 0
    assert storage.get("blob0") is not None


@sqlite_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("wal_mode")
def test_database_size_counts_the_sqlite_write_ahead_log(storage: Storage) -> None:
    fill(storage, 1)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        page_size = cursor.fetchone()[0]
    wal = os.path.getsize(wal_path())

    assert wal > 0
    assert storage.database_size() == pages * page_size + wal


@postgres_only
@pytest.mark.django_db
def test_checkpoint_wal_is_a_no_op_without_queries_on_postgresql(
    storage: Storage, django_assert_num_queries
) -> None:
    with django_assert_num_queries(0):
        storage.checkpoint_wal()


@pytest.mark.django_db
def test_database_size_is_positive_and_grows_with_the_data(storage: Storage) -> None:
    before = storage.database_size()

    fill(storage, 3)

    assert before > 0
    assert storage.database_size() >= before + 2 * 1024 * 1024


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_vacuum_gives_space_freed_by_deletes_back_on_sqlite(storage: Storage) -> None:
    fill(storage, 3)
    storage.apply([Set(f"blob{n}", b"") for n in range(3 * 16)])
    before = storage.database_size()

    storage.vacuum()

    assert storage.database_size() <= before - 2 * 1024 * 1024
    assert storage.get("blob0") == b""


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_vacuum_analyzes_the_later_tables_on_postgresql(storage: Storage) -> None:
    storage.set("k", b"v")

    storage.vacuum()

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_stat_user_tables WHERE relname LIKE 'later%%' "
            "AND (last_vacuum IS NULL OR last_analyze IS NULL)"
        )
        assert cursor.fetchall() == []
        cursor.execute("SELECT count(*) FROM pg_stat_user_tables WHERE relname LIKE 'later%%'")
        assert cursor.fetchone()[0] >= 2


@pytest.mark.django_db
def test_vacuum_inside_an_atomic_block_is_refused_with_a_clear_error(storage: Storage) -> None:
    with pytest.raises(AutocommitRequired) as raised, transaction.atomic():
        storage.vacuum()

    assert isinstance(raised.value, LaterError)
    assert str(raised.value) == (
        "vacuum() was called inside transaction.atomic(using='default'); "
        "it must be called in autocommit mode, outside any atomic block."
    )


@sqlite_only
@pytest.mark.django_db
def test_checkpoint_wal_inside_an_atomic_block_is_refused_on_sqlite(storage: Storage) -> None:
    with pytest.raises(AutocommitRequired) as raised, transaction.atomic():
        storage.checkpoint_wal()

    assert str(raised.value) == (
        "checkpoint_wal() was called inside transaction.atomic(using='default'); "
        "it must be called in autocommit mode, outside any atomic block."
    )
