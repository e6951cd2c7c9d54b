import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from later_django.models import StorageValue
from later_django.storage import Storage

from .conftest import backdate

THREADS = 6
ROUNDS = 40


@pytest.mark.django_db
def test_set_if_absent_creates_an_absent_key(storage: Storage) -> None:
    assert storage.set_if_absent("k", b"first", ttl_seconds=60) is True

    assert storage.get("k") == b"first"
    assert StorageValue.objects.get(key="k").date_expire is not None


@pytest.mark.django_db
def test_set_if_absent_leaves_an_unexpired_value_unchanged(storage: Storage) -> None:
    storage.set("k", b"first", ttl_seconds=60)
    expire = StorageValue.objects.get(key="k").date_expire

    assert storage.set_if_absent("k", b"second") is False

    assert storage.get("k") == b"first"
    assert StorageValue.objects.get(key="k").date_expire == expire


@pytest.mark.django_db
def test_set_if_absent_replaces_an_expired_value(storage: Storage) -> None:
    storage.set("k", b"stale", ttl_seconds=60)
    backdate(StorageValue.objects.filter(key="k"))

    assert storage.set_if_absent("k", b"fresh") is True

    assert storage.get("k") == b"fresh"
    assert StorageValue.objects.get(key="k").date_expire is None


@pytest.mark.django_db
def test_set_if_absent_succeeds_again_after_a_delete(storage: Storage) -> None:
    assert storage.set_if_absent("k", b"1") is True
    storage.delete("k")

    assert storage.set_if_absent("k", b"2") is True
    assert storage.get("k") == b"2"


@pytest.mark.django_db
def test_set_if_absent_is_per_namespace() -> None:
    assert Storage("one").set_if_absent("k", b"1") is True
    assert Storage("two").set_if_absent("k", b"2") is True
    assert Storage("one").get("k") == b"1"


def race(rounds: int, attempt: Callable[[int, int], bool]) -> list[list[bool]]:
    """Run ``attempt(round, thread)`` on THREADS threads at once, each on its own connection."""
    barrier = threading.Barrier(THREADS)
    connection_ids: set[int] = set()

    def run(thread: int) -> list[bool]:
        try:
            connection.ensure_connection()
            connection_ids.add(id(connection.connection))
            won = []
            for number in range(rounds):
                barrier.wait(timeout=10)
                won.append(attempt(number, thread))
            return won
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        per_thread = [future.result() for future in [pool.submit(run, n) for n in range(THREADS)]]
    assert len(connection_ids) == THREADS, "every thread must race on its own connection"
    return [list(row) for row in zip(*per_thread, strict=True)]


@pytest.mark.django_db(transaction=True)
def test_racing_connections_on_a_fresh_key_produce_exactly_one_winner_per_round() -> None:
    results = race(
        ROUNDS,
        lambda number, thread: Storage("race").set_if_absent(f"key-{number}", b"%d" % thread),
    )

    storage = Storage("race")
    for number, row in enumerate(results):
        assert row.count(True) == 1, f"round {number}: {row}"
        assert storage.get(f"key-{number}") == b"%d" % row.index(True)


@pytest.mark.django_db(transaction=True)
def test_racing_connections_on_an_expired_key_produce_exactly_one_winner_per_round() -> None:
    storage = Storage("race")
    for number in range(ROUNDS):
        storage.set(f"key-{number}", b"stale", ttl_seconds=60)
    backdate(StorageValue.objects.filter(namespace="race"))

    results = race(
        ROUNDS,
        lambda number, thread: Storage("race").set_if_absent(f"key-{number}", b"%d" % thread),
    )

    for number, row in enumerate(results):
        assert row.count(True) == 1, f"round {number}: {row}"
        assert storage.get(f"key-{number}") == b"%d" % row.index(True)
