from datetime import timedelta

import pytest
from django.utils import timezone

from later_django.models import StorageRangeMember, StorageValue
from later_django.storage import RangeAdd, Set, Storage

pytestmark = pytest.mark.django_db


@pytest.fixture
def expired_rows(storage: Storage) -> list[str]:
    """Store ten expired rows, alternating tables and namespaces, oldest first; return their names.

    Live rows (no expiry, a future expiry) of both namespaces sit beside them.
    """
    other = Storage("other")
    names = []
    for n in range(10):
        name = f"x{n}"
        names.append(name)
        owner = other if n % 4 == 3 else storage
        if n % 2:
            owner.apply([RangeAdd("r", name, ttl_seconds=60)])
        else:
            owner.set(name, b"v", ttl_seconds=60)
    base = timezone.now() - timedelta(hours=1)
    for n, name in enumerate(names):
        expire = base + timedelta(seconds=n)
        StorageValue.objects.filter(key=name).update(date_expire=expire)
        StorageRangeMember.objects.filter(member=name).update(date_expire=expire)
    for owner in (storage, other):
        owner.apply(
            [
                Set("live", b"v"),
                Set("later", b"v", ttl_seconds=3600),
                RangeAdd("r", "live"),
                RangeAdd("r", "later", ttl_seconds=3600),
            ]
        )
    return names


def remaining() -> set[str]:
    return set(StorageValue.objects.values_list("key", flat=True)) | set(
        StorageRangeMember.objects.values_list("member", flat=True)
    )


def test_sweep_deletes_at_most_limit_rows_across_both_tables_oldest_first(
    storage: Storage, expired_rows: list[str]
) -> None:
    assert storage.sweep_expired(3) == 3

    assert not remaining() & set(expired_rows[:3])
    assert set(expired_rows[3:]) <= remaining()
    assert StorageValue.objects.filter(key__in=expired_rows[:3]).count() == 0
    assert StorageRangeMember.objects.filter(member__in=expired_rows[:3]).count() == 0


def test_repeated_sweeps_drain_the_backlog_in_bounded_steps(
    storage: Storage, expired_rows: list[str]
) -> None:
    assert [storage.sweep_expired(4) for _ in range(4)] == [4, 4, 2, 0]

    assert not remaining() & set(expired_rows)


def test_sweep_removes_expired_rows_of_every_namespace_and_no_live_row(
    storage: Storage, expired_rows: list[str]
) -> None:
    assert storage.sweep_expired(1000) == len(expired_rows)

    assert not remaining() & set(expired_rows)
    for owner in (storage, Storage("other")):
        assert owner.get("live") == b"v"
        assert owner.get("later") == b"v"
        assert [item.member for item in owner.range_page("r").items] == ["live", "later"]


def test_sweep_with_nothing_expired_deletes_nothing(storage: Storage) -> None:
    storage.set("live", b"v", ttl_seconds=60)

    assert storage.sweep_expired(10) == 0
    assert storage.get("live") == b"v"


def test_a_sweep_larger_than_one_delete_chunk_stays_within_its_limit(storage: Storage) -> None:
    storage.apply([Set(f"k{n}", b"v", ttl_seconds=0) for n in range(1500)])
    storage.apply([RangeAdd("r", f"m{n}", ttl_seconds=0) for n in range(1500)])

    assert storage.sweep_expired(2500) == 2500
    assert StorageValue.objects.count() + StorageRangeMember.objects.count() == 500
