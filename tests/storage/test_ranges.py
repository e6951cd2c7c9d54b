import pytest

from later_django.models import StorageRangeMember
from later_django.storage import RangeAdd, RangeItem, RangePage, RangeRemove, Storage

from .conftest import backdate

pytestmark = pytest.mark.django_db

MEMBERS = 3456
EXPIRED_EVERY = 7


def members_of(page: RangePage) -> list[str]:
    return [item.member for item in page.items]


@pytest.fixture
def big_range(storage: Storage) -> list[str]:
    """Fill range ``big`` with MEMBERS members, every EXPIRED_EVERY-th already expired."""
    names = [f"m{i:05}" for i in range(MEMBERS)]
    storage.apply([RangeAdd("big", name) for name in names])
    storage.apply([RangeAdd("other", name) for name in names[:50]])
    expired = names[::EXPIRED_EVERY]
    backdate(StorageRangeMember.objects.filter(key="big", member__in=expired))
    return [name for name in names if name not in set(expired)]


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_cursor_pages_return_every_unexpired_member_exactly_once_at_one_query_each(
    storage: Storage, big_range: list[str], order: str, django_assert_num_queries
) -> None:
    seen: list[RangeItem] = []
    cursor = None
    pages = 0
    while True:
        with django_assert_num_queries(1) as captured:
            page = storage.range_page("big", cursor=cursor, limit=100, order=order)  # type: ignore[arg-type]
        assert "OFFSET" not in captured.captured_queries[0]["sql"].upper()
        seen.extend(page.items)
        pages += 1
        if page.next_cursor is None:
            break
        assert page.next_cursor == page.items[-1].cursor
        cursor = page.next_cursor

    expected = big_range if order == "asc" else big_range[::-1]
    assert [item.member for item in seen] == expected
    assert len({item.cursor for item in seen}) == len(seen)
    cursors = [item.cursor for item in seen]
    assert cursors == sorted(cursors, reverse=order == "desc")
    assert pages == -(-len(big_range) // 100)


def test_a_range_that_ends_on_a_page_boundary_has_no_empty_last_page(storage: Storage) -> None:
    storage.apply([RangeAdd("r", f"m{i:03}") for i in range(200)])

    first = storage.range_page("r", limit=100)
    second = storage.range_page("r", cursor=first.next_cursor, limit=100)

    assert first.next_cursor is not None
    assert len(second.items) == 100
    assert second.next_cursor is None


def test_an_empty_range_is_one_empty_page(storage: Storage) -> None:
    assert storage.range_page("nothing") == RangePage(items=[], next_cursor=None)


def test_range_count_counts_only_unexpired_members_of_that_key(
    storage: Storage, big_range: list[str]
) -> None:
    assert storage.range_count("big") == len(big_range)
    assert storage.range_count("other") == 50
    assert storage.range_count("nothing") == 0


def test_a_zero_ttl_member_is_skipped_at_once(storage: Storage) -> None:
    storage.apply([RangeAdd("r", "a"), RangeAdd("r", "b", ttl_seconds=0), RangeAdd("r", "c")])

    assert members_of(storage.range_page("r")) == ["a", "c"]
    assert members_of(storage.range_page("r", order="desc")) == ["c", "a"]
    assert storage.range_count("r") == 2
    assert StorageRangeMember.objects.filter(member="b").exists(), "still stored until swept"


def test_readding_a_present_member_keeps_its_cursor_and_updates_its_expiry(
    storage: Storage,
) -> None:
    storage.apply([RangeAdd("r", "a"), RangeAdd("r", "b")])
    before = storage.range_page("r").items

    storage.apply([RangeAdd("r", "a", ttl_seconds=60)])

    assert storage.range_page("r").items == before
    assert StorageRangeMember.objects.get(member="a").date_expire is not None
    storage.apply([RangeAdd("r", "a")])
    assert StorageRangeMember.objects.get(member="a").date_expire is None


def test_readding_an_expired_member_appends_it_with_a_new_cursor(storage: Storage) -> None:
    storage.apply([RangeAdd("r", "a", ttl_seconds=60), RangeAdd("r", "b")])
    old_cursor = storage.range_page("r").items[0].cursor
    backdate(StorageRangeMember.objects.filter(member="a"))

    storage.apply([RangeAdd("r", "a")])

    items = storage.range_page("r").items
    assert [item.member for item in items] == ["b", "a"]
    assert items[1].cursor > old_cursor


def test_range_remove_removes_one_member_and_tolerates_absent_ones(storage: Storage) -> None:
    storage.apply([RangeAdd("r", "a"), RangeAdd("r", "b"), RangeAdd("s", "a")])

    storage.apply([RangeRemove("r", "a"), RangeRemove("r", "zzz"), RangeRemove("t", "a")])

    assert members_of(storage.range_page("r")) == ["b"]
    assert members_of(storage.range_page("s")) == ["a"]


def test_namespaces_do_not_see_each_others_ranges() -> None:
    Storage("one").apply([RangeAdd("r", "a")])

    assert Storage("two").range_page("r").items == []
    assert Storage("two").range_count("r") == 0
    Storage("two").apply([RangeRemove("r", "a")])
    assert Storage("one").range_count("r") == 1
