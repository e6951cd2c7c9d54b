"""Reads: values by key and keyset pages of ordered ranges, always ignoring expired rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from django.db.models import Q

from ..models.core import StorageRangeMember, StorageValue

RangeOrder = Literal["asc", "desc"]

# Keeps get_many's IN list far below SQLite's bound-parameter limit.
GET_MANY_CHUNK = 1000


@dataclass(frozen=True, slots=True)
class RangeItem:
    """One range member and its stable cursor (the member row's id)."""

    cursor: int
    member: str


@dataclass(frozen=True, slots=True)
class RangePage:
    """A page of range members; ``next_cursor`` is None when no more members follow."""

    items: list[RangeItem]
    next_cursor: int | None


def unexpired(now: datetime) -> Q:
    """Match rows that have no expiry or expire after ``now``."""
    return Q(date_expire__isnull=True) | Q(date_expire__gt=now)


def get_value(namespace: str, using: str, key: str, now: datetime) -> bytes | None:
    rows = list(
        StorageValue.objects.using(using)
        .filter(unexpired(now), namespace=namespace, key=key)
        .values_list("value", flat=True)[:1]
    )
    return bytes(rows[0]) if rows else None


def get_values(namespace: str, using: str, keys: list[str], now: datetime) -> dict[str, bytes]:
    """Return the unexpired values of ``keys``: one query per GET_MANY_CHUNK distinct keys."""
    wanted = list(dict.fromkeys(keys))
    found: dict[str, bytes] = {}
    for start in range(0, len(wanted), GET_MANY_CHUNK):
        rows = (
            StorageValue.objects.using(using)
            .filter(
                unexpired(now), namespace=namespace, key__in=wanted[start : start + GET_MANY_CHUNK]
            )
            .values_list("key", "value")
        )
        found.update((key, bytes(value)) for key, value in rows)
    return found


def value_exists(namespace: str, using: str, key: str, now: datetime) -> bool:
    return (
        StorageValue.objects.using(using)
        .filter(unexpired(now), namespace=namespace, key=key)
        .exists()
    )


def range_page(
    namespace: str,
    using: str,
    key: str,
    cursor: int | None,
    limit: int,
    order: RangeOrder,
    now: datetime,
) -> RangePage:
    """Read up to ``limit`` members after ``cursor`` in one indexed query.

    The cursor is a bound on ``id`` (served by the ``(namespace, key, id)``
    index), so reading page one thousand costs what reading page one does.
    One extra row is fetched to learn whether another page follows.
    """
    members = StorageRangeMember.objects.using(using).filter(
        unexpired(now), namespace=namespace, key=key
    )
    if order == "asc":
        if cursor is not None:
            members = members.filter(id__gt=cursor)
        members = members.order_by("id")
    else:
        if cursor is not None:
            members = members.filter(id__lt=cursor)
        members = members.order_by("-id")
    rows = list(members.values_list("id", "member")[: limit + 1])
    items = [RangeItem(cursor=row_id, member=member) for row_id, member in rows[:limit]]
    return RangePage(items=items, next_cursor=items[-1].cursor if len(rows) > limit else None)


def range_count(namespace: str, using: str, key: str, now: datetime) -> int:
    return (
        StorageRangeMember.objects.using(using)
        .filter(unexpired(now), namespace=namespace, key=key)
        .count()
    )
