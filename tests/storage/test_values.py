from datetime import timedelta

import pytest
from django.utils import timezone

from later_django.models import StorageValue
from later_django.storage import Set, Storage

from .conftest import backdate

pytestmark = pytest.mark.django_db


def stored(key: str, namespace: str = "test") -> StorageValue:
    return StorageValue.objects.get(namespace=namespace, key=key)


def test_set_then_get_returns_the_bytes(storage: Storage) -> None:
    storage.set("job:1", b"\x00\xffpayload")

    assert storage.get("job:1") == b"\x00\xffpayload"
    assert storage.exists("job:1")


def test_get_of_an_absent_key_is_none(storage: Storage) -> None:
    assert storage.get("missing") is None
    assert not storage.exists("missing")


def test_set_replaces_the_value_and_clears_a_previous_expiry(storage: Storage) -> None:
    storage.set("k", b"old", ttl_seconds=60)
    assert stored("k").date_expire is not None

    storage.set("k", b"new")

    assert storage.get("k") == b"new"
    assert stored("k").date_expire is None


def test_set_with_a_ttl_stores_an_expiry_that_far_ahead(storage: Storage) -> None:
    before = timezone.now()
    storage.set("k", b"v", ttl_seconds=90)
    after = timezone.now()

    expire = stored("k").date_expire
    assert expire is not None
    assert before + timedelta(seconds=90) <= expire <= after + timedelta(seconds=90)


def test_a_zero_ttl_value_is_invisible_at_once(storage: Storage) -> None:
    storage.set("k", b"v", ttl_seconds=0)

    assert storage.get("k") is None
    assert not storage.exists("k")
    assert storage.get_many(["k"]) == {}
    assert StorageValue.objects.filter(key="k").exists(), "still stored until swept"


def test_a_value_past_its_expiry_is_invisible_before_any_sweep(storage: Storage) -> None:
    storage.set("k", b"v", ttl_seconds=3600)
    backdate(StorageValue.objects.filter(key="k"), seconds=1)

    assert storage.get("k") is None
    assert not storage.exists("k")
    assert storage.get_many(["k"]) == {}
    assert StorageValue.objects.filter(key="k").exists(), "still stored until swept"


def test_delete_removes_the_value_and_tolerates_an_absent_key(storage: Storage) -> None:
    storage.set("k", b"v")

    storage.delete("k")
    storage.delete("never-set")

    assert storage.get("k") is None


def test_expire_sets_an_expiry_on_an_existing_value(storage: Storage) -> None:
    storage.set("k", b"v")

    storage.expire("k", 120)

    expire = stored("k").date_expire
    assert expire is not None
    assert (
        timezone.now() + timedelta(seconds=110) < expire <= timezone.now() + timedelta(seconds=120)
    )
    assert storage.get("k") == b"v"


def test_expire_of_an_absent_key_does_not_create_it(storage: Storage) -> None:
    storage.expire("ghost", 60)

    assert not StorageValue.objects.filter(key="ghost").exists()


def test_expire_does_not_revive_an_expired_value(storage: Storage) -> None:
    storage.set("k", b"v", ttl_seconds=60)
    backdate(StorageValue.objects.filter(key="k"))

    storage.expire("k", 3600)

    assert storage.get("k") is None


def test_get_many_returns_only_unexpired_values_in_one_query(
    storage: Storage, django_assert_num_queries
) -> None:
    storage.set("a", b"1")
    storage.set("b", b"2", ttl_seconds=60)
    storage.set("gone", b"3", ttl_seconds=60)
    backdate(StorageValue.objects.filter(key="gone"))

    with django_assert_num_queries(1):
        found = storage.get_many(["a", "b", "gone", "missing", "a"])

    assert found == {"a": b"1", "b": b"2"}


def test_get_many_of_no_keys_runs_no_query(storage: Storage, django_assert_num_queries) -> None:
    with django_assert_num_queries(0):
        assert storage.get_many([]) == {}


def test_get_many_reads_more_keys_than_one_chunk(storage: Storage) -> None:
    keys = [f"k{i}" for i in range(2500)]
    storage.apply([Set(key, key.encode()) for key in keys])

    assert storage.get_many(keys) == {key: key.encode() for key in keys}


def test_namespaces_do_not_see_each_others_values() -> None:
    Storage("one").set("k", b"from one")

    assert Storage("two").get("k") is None
    assert not Storage("two").exists("k")
    Storage("two").delete("k")
    assert Storage("one").get("k") == b"from one"
