"""Every InvalidArgument the storage layer raises, with its exact message."""

from collections.abc import Callable
from typing import Any

import pytest

from later_django.exceptions import InvalidArgument
from later_django.models import StorageValue
from later_django.storage import Delete, Expire, RangeAdd, RangeRemove, Set, Storage

LONG = "k" * 256
LONG_SHOWN = "'kkkkkkkkkkkkkkkkkkkkkkkkkkk...kkkkkkkkkkkkkkkkkkkkkkkkkkkk' (256 characters)"
KEY_RULE = "it must be a non-empty str of at most 255 characters without NUL."
TTL_RULE = "it must be a finite number of seconds from 0 to 3155760000 (100 years)"
OPERATION_NAMES = "Set, Delete, Expire, RangeAdd or RangeRemove"

OPERATION_CASES: list[tuple[Callable[[], object], str]] = [
    (lambda: Set("", b"v"), f"Set.key is ''; {KEY_RULE}"),
    (lambda: Set(LONG, b"v"), f"Set.key is {LONG_SHOWN}; {KEY_RULE}"),
    (lambda: Set(7, b"v"), f"Set.key is 7; {KEY_RULE}"),  # type: ignore[arg-type]
    (lambda: Set("a\x00b", b"v"), f"Set.key is 'a\\x00b'; {KEY_RULE}"),
    (lambda: Set("k", "text"), "Set.value is 'text'; it must be bytes."),  # type: ignore[arg-type]
    (
        lambda: Set("k", bytearray(b"x")),  # type: ignore[arg-type]
        "Set.value is bytearray(b'x'); it must be bytes.",
    ),
    (lambda: Set("k", b"v", -1), f"Set.ttl_seconds is -1; {TTL_RULE}, or None."),
    (lambda: Set("k", b"v", float("nan")), f"Set.ttl_seconds is nan; {TTL_RULE}, or None."),
    (lambda: Set("k", b"v", float("inf")), f"Set.ttl_seconds is inf; {TTL_RULE}, or None."),
    (lambda: Set("k", b"v", 4e9), f"Set.ttl_seconds is 4000000000.0; {TTL_RULE}, or None."),
    (
        lambda: Set("k", b"v", 10**400),
        f"Set.ttl_seconds is 100000000000000000...0000000000000000000; {TTL_RULE}, or None.",
    ),
    (lambda: Set("k", b"v", True), f"Set.ttl_seconds is True; {TTL_RULE}, or None."),
    (lambda: Set("k", b"v", "60"), f"Set.ttl_seconds is '60'; {TTL_RULE}, or None."),  # type: ignore[arg-type]
    (lambda: Delete(""), f"Delete.key is ''; {KEY_RULE}"),
    (lambda: Expire(LONG, 60), f"Expire.key is {LONG_SHOWN}; {KEY_RULE}"),
    (lambda: Expire("k", None), f"Expire.ttl_seconds is None; {TTL_RULE}."),  # type: ignore[arg-type]
    (lambda: Expire("k", -0.5), f"Expire.ttl_seconds is -0.5; {TTL_RULE}."),
    (lambda: RangeAdd(LONG, "m"), f"RangeAdd.key is {LONG_SHOWN}; {KEY_RULE}"),
    (lambda: RangeAdd("r", ""), f"RangeAdd.member is ''; {KEY_RULE}"),
    (lambda: RangeAdd("r", LONG), f"RangeAdd.member is {LONG_SHOWN}; {KEY_RULE}"),
    (lambda: RangeAdd("r", "m", -1), f"RangeAdd.ttl_seconds is -1; {TTL_RULE}, or None."),
    (lambda: RangeRemove("", "m"), f"RangeRemove.key is ''; {KEY_RULE}"),
    (lambda: RangeRemove("r", None), f"RangeRemove.member is None; {KEY_RULE}"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("build", "message"), OPERATION_CASES)
def test_an_invalid_operation_is_refused_when_built(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        build()

    assert str(raised.value) == message


def test_invalid_argument_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"^Set\.key is"):
        Set("", b"v")


def test_the_largest_allowed_ttl_is_accepted() -> None:
    assert Set("k", b"v", 3155760000).ttl_seconds == 3155760000


# Typed Any: these calls break the annotations on purpose.
STORAGE_CASES: list[tuple[Callable[[Any], object], str]] = [
    (lambda s: s.get(LONG), f"key is {LONG_SHOWN}; {KEY_RULE}"),
    (lambda s: s.exists(""), f"key is ''; {KEY_RULE}"),
    (lambda s: s.get_many(["a", 3]), f"keys[1] is 3; {KEY_RULE}"),
    (lambda s: s.set_if_absent("", b"v"), f"key is ''; {KEY_RULE}"),
    (lambda s: s.set_if_absent("k", "v"), "value is 'v'; it must be bytes."),
    (lambda s: s.set_if_absent("k", b"v", -1), f"ttl_seconds is -1; {TTL_RULE}, or None."),
    (lambda s: s.set("k", b"v", -1), f"Set.ttl_seconds is -1; {TTL_RULE}, or None."),
    (lambda s: s.expire("k", None), f"Expire.ttl_seconds is None; {TTL_RULE}."),
    (lambda s: s.range_page(""), f"key is ''; {KEY_RULE}"),
    (lambda s: s.range_page("r", limit=0), "limit is 0; it must be an int from 1 to 1000."),
    (lambda s: s.range_page("r", limit=1001), "limit is 1001; it must be an int from 1 to 1000."),
    (lambda s: s.range_page("r", limit=True), "limit is True; it must be an int from 1 to 1000."),
    (
        lambda s: s.range_page("r", cursor=-1),
        "cursor is -1; it must be a non-negative int or None.",
    ),
    (
        lambda s: s.range_page("r", cursor="5"),
        "cursor is '5'; it must be a non-negative int or None.",
    ),
    (lambda s: s.range_page("r", order="up"), "order is 'up'; it must be 'asc' or 'desc'."),
    (lambda s: s.range_count(LONG), f"key is {LONG_SHOWN}; {KEY_RULE}"),
    (lambda s: s.sweep_expired(0), "limit is 0; it must be a positive int."),
    (lambda s: s.sweep_expired(2.5), "limit is 2.5; it must be a positive int."),
    (
        lambda s: s.apply(None),
        f"operations is None; it must be a sequence of {OPERATION_NAMES}.",
    ),
    (
        lambda s: s.apply([Set("a", b"1"), ("set", "b", b"2")]),
        f"operations[1] is ('set', 'b', b'2'); it must be a {OPERATION_NAMES}.",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("call", "message"), STORAGE_CASES)
def test_an_invalid_argument_is_refused_before_anything_is_written(
    storage: Storage, call: Callable[[Storage], object], message: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        call(storage)

    assert str(raised.value) == message
    assert not StorageValue.objects.exists()


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ("", "namespace is ''; it must be a non-empty str of at most 100 characters without NUL."),
        (
            "n" * 101,
            "namespace is 'nnnnnnnnnnnnnnnnnnnnnnnnnnn...nnnnnnnnnnnnnnnnnnnnnnnnnnnn' "
            "(101 characters); it must be a non-empty str of at most 100 characters without NUL.",
        ),
        (
            None,
            "namespace is None; it must be a non-empty str of at most 100 characters without NUL.",
        ),
    ],
)
def test_a_storage_needs_a_valid_namespace(namespace: object, message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        Storage(namespace)  # type: ignore[arg-type]

    assert str(raised.value) == message


def test_a_storage_needs_a_configured_database_alias() -> None:
    with pytest.raises(InvalidArgument) as raised:
        Storage("test", using="replica")

    assert str(raised.value) == (
        "using is 'replica'; it must be an alias in settings.DATABASES ('default')."
    )
