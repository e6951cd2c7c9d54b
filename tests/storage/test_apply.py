from collections.abc import Iterator

import pytest
from django.db import DatabaseError, connection, transaction

from later_django.models import StorageRangeMember, StorageValue
from later_django.storage import (
    Delete,
    Expire,
    Operation,
    RangeAdd,
    RangeRemove,
    Set,
    Storage,
)

SQLITE_POISON = [
    'CREATE TRIGGER later_test_poison BEFORE INSERT ON later_storage WHEN NEW."key" = '
    "'poison' BEGIN SELECT RAISE(ABORT, 'poisoned key'); END",
]
POSTGRES_POISON = [
    "CREATE FUNCTION later_test_poison() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN IF NEW.key = 'poison' THEN RAISE EXCEPTION 'poisoned key'; END IF; "
    "RETURN NEW; END $$",
    "CREATE TRIGGER later_test_poison BEFORE INSERT ON later_storage "
    "FOR EACH ROW EXECUTE FUNCTION later_test_poison()",
]
UNPOISON = {
    "sqlite": ["DROP TRIGGER later_test_poison"],
    "postgresql": [
        "DROP TRIGGER later_test_poison ON later_storage",
        "DROP FUNCTION later_test_poison()",
    ],
}


@pytest.fixture
def poisoned_key() -> Iterator[str]:
    """Make the database itself reject any insert of the key ``poison``."""
    statements = SQLITE_POISON if connection.vendor == "sqlite" else POSTGRES_POISON
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)
    yield "poison"
    with connection.cursor() as cursor:
        for sql in UNPOISON[connection.vendor]:
            cursor.execute(sql)


def a_batch_ending_in(storage: Storage, last: Set) -> list[Operation]:
    storage.set("kept", b"before")
    storage.set("kept-forever", b"before")
    return [
        Set("new", b"1"),
        RangeAdd("index", "new"),
        Delete("kept"),
        Expire("kept-forever", 60),
        last,
    ]


def assert_nothing_from_the_batch(storage: Storage) -> None:
    assert storage.get("new") is None
    assert storage.range_count("index") == 0
    assert not StorageValue.objects.filter(key="poison").exists()
    assert storage.get("kept") == b"before"
    assert StorageValue.objects.get(key="kept-forever").date_expire is None


@pytest.mark.django_db(transaction=True)
def test_a_batch_whose_last_operation_fails_in_the_database_leaves_nothing(
    storage: Storage, poisoned_key: str
) -> None:
    batch = a_batch_ending_in(storage, Set(poisoned_key, b"x"))

    with pytest.raises(DatabaseError, match="poisoned key"):
        storage.apply(batch)

    assert_nothing_from_the_batch(storage)


@pytest.mark.django_db
@pytest.mark.parametrize("whole_batch", [True, False], ids=["batch", "single-set"])
def test_a_failed_batch_inside_a_caller_transaction_rolls_back_only_itself(
    storage: Storage, poisoned_key: str, whole_batch: bool
) -> None:
    with transaction.atomic():
        storage.set("caller-work", b"mine")
        last = Set(poisoned_key, b"x")
        batch = a_batch_ending_in(storage, last)
        batch = batch if whole_batch else [last]
        with pytest.raises(DatabaseError, match="poisoned key"):
            storage.apply(batch)

        assert_nothing_from_the_batch(storage)
        assert storage.get("caller-work") == b"mine"
        storage.set("after", b"still usable")
    assert storage.get("after") == b"still usable"


@pytest.mark.django_db(transaction=True)
def test_a_batch_joins_the_caller_transaction_and_rolls_back_with_it(storage: Storage) -> None:
    class CallerFailed(Exception):
        pass

    def caller_work() -> None:
        with transaction.atomic():
            storage.apply([Set("a", b"1"), RangeAdd("index", "a")])
            storage.set("b", b"2")
            assert storage.get("a") == b"1"
            raise CallerFailed

    with pytest.raises(CallerFailed):
        caller_work()

    assert StorageValue.objects.count() == 0
    assert StorageRangeMember.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        ([Set("k", b"1"), Set("k", b"2")], b"2"),
        ([Set("k", b"1"), Delete("k")], None),
        ([Delete("k"), Set("k", b"3")], b"3"),
        ([Set("k", b"1"), Expire("k", 0)], None),
        ([Set("k", b"1", ttl_seconds=0), Expire("k", 60)], None),
        ([Set("k", b"1"), Delete("k"), Set("k", b"4"), Delete("other")], b"4"),
    ],
)
def test_operations_in_a_batch_take_effect_in_order(
    storage: Storage, batch: list[Operation], expected: bytes | None
) -> None:
    storage.apply(batch)

    assert storage.get("k") == expected


@pytest.mark.django_db
def test_range_operations_in_a_batch_take_effect_in_order(storage: Storage) -> None:
    storage.apply(
        [
            RangeAdd("r", "a"),
            RangeAdd("r", "b"),
            RangeRemove("r", "a"),
            RangeAdd("r", "c"),
            RangeRemove("r", "b"),
            RangeRemove("r", "never"),
        ]
    )

    assert [item.member for item in storage.range_page("r").items] == ["c"]


@pytest.mark.django_db
def test_a_batch_longer_than_one_statement_chunk_is_written_whole(storage: Storage) -> None:
    storage.apply([Set(f"k{i}", b"v") for i in range(1234)] + [Expire("k0", 60)])

    assert StorageValue.objects.filter(namespace="test").count() == 1234
    assert StorageValue.objects.exclude(date_expire=None).get().key == "k0"


@pytest.mark.django_db
def test_consecutive_operations_of_one_type_are_one_statement_inside_a_savepoint(
    storage: Storage, django_assert_num_queries
) -> None:
    with django_assert_num_queries(4) as captured:
        storage.apply([Set(f"k{i}", b"v") for i in range(100)] + [Delete("x"), Delete("y")])

    sql = [query["sql"].split()[0].upper() for query in captured.captured_queries]
    assert sql == ["SAVEPOINT", "INSERT", "DELETE", "RELEASE"]


@pytest.mark.django_db
def test_an_empty_batch_writes_nothing(storage: Storage, django_assert_num_queries) -> None:
    with django_assert_num_queries(0):
        storage.apply([])
