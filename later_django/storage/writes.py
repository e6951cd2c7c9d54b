"""Writes: the atomic batch behind ``Storage.apply`` and the compare-and-set insert."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from functools import reduce
from itertools import groupby
from operator import or_

from django.db import connections, transaction
from django.db.models import Case, DateTimeField, Q, Value, When

from ..models.core import StorageRangeMember, StorageValue
from .operations import Delete, Expire, Operation, RangeAdd, RangeRemove, Set
from .reads import unexpired

# Operations per statement: keeps every statement far below SQLite's bound-parameter limit.
CHUNK = 500


def expires_at(now: datetime, ttl_seconds: float | None) -> datetime | None:
    return None if ttl_seconds is None else now + timedelta(seconds=ttl_seconds)


def statements(operations: list[Operation]) -> Iterator[list[Operation]]:
    """Split a batch into runs of one operation type, at most CHUNK long, in order."""
    for _, group in groupby(operations, key=type):
        run = list(group)
        for start in range(0, len(run), CHUNK):
            yield run[start : start + CHUNK]


def apply_operations(
    namespace: str, using: str, operations: list[Operation], now: datetime
) -> None:
    """Write ``operations`` in order, all or nothing, on the connection for ``using``.

    Inside a caller's ``atomic()`` block this is a savepoint even for a single
    statement, so a failure rolls back only the batch and, on PostgreSQL,
    leaves the caller's transaction usable.
    """
    with transaction.atomic(using=using):
        for run in statements(operations):
            write_run(namespace, using, run, now)


def write_run(namespace: str, using: str, run: list[Operation], now: datetime) -> None:
    """Write one run of same-type operations; later operations on one key win, as if sequential."""
    first = run[0]
    if isinstance(first, Set):
        upsert_values(namespace, using, {op.key: op for op in run if isinstance(op, Set)}, now)
    elif isinstance(first, Delete):
        keys = {op.key for op in run if isinstance(op, Delete)}
        StorageValue.objects.using(using).filter(namespace=namespace, key__in=keys).delete()
    elif isinstance(first, Expire):
        expire_values(namespace, using, {op.key: op for op in run if isinstance(op, Expire)}, now)
    elif isinstance(first, RangeAdd):
        adds = {(op.key, op.member): op for op in run if isinstance(op, RangeAdd)}
        upsert_members(namespace, using, adds, now)
    else:
        pairs = {(op.key, op.member) for op in run if isinstance(op, RangeRemove)}
        StorageRangeMember.objects.using(using).filter(
            member_filter(pairs), namespace=namespace
        ).delete()


def upsert_values(namespace: str, using: str, sets: dict[str, Set], now: datetime) -> None:
    rows = [
        StorageValue(
            namespace=namespace,
            key=op.key,
            value=op.value,
            date_expire=expires_at(now, op.ttl_seconds),
        )
        for op in sets.values()
    ]
    StorageValue.objects.using(using).bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["namespace", "key"],
        update_fields=["value", "date_expire"],
    )


def expire_values(namespace: str, using: str, expires: dict[str, Expire], now: datetime) -> None:
    whens = [
        When(key=key, then=Value(expires_at(now, op.ttl_seconds), output_field=DateTimeField()))
        for key, op in expires.items()
    ]
    # Only unexpired rows: extending an expired one would bring an absent key back.
    StorageValue.objects.using(using).filter(
        unexpired(now), namespace=namespace, key__in=list(expires)
    ).update(date_expire=Case(*whens, output_field=DateTimeField()))


def upsert_members(
    namespace: str, using: str, adds: dict[tuple[str, str], RangeAdd], now: datetime
) -> None:
    members = StorageRangeMember.objects.using(using)
    # An expired member counts as absent: drop it so the upsert appends it with a new cursor
    # instead of reviving it at its old position.
    members.filter(member_filter(adds), namespace=namespace, date_expire__lte=now).delete()
    rows = [
        StorageRangeMember(
            namespace=namespace,
            key=op.key,
            member=op.member,
            date_expire=expires_at(now, op.ttl_seconds),
        )
        for op in adds.values()
    ]
    members.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["namespace", "key", "member"],
        update_fields=["date_expire"],
    )


def member_filter(pairs: Iterable[tuple[str, str]]) -> Q:
    """Match the ``(key, member)`` pairs in ``pairs``, one ``member IN`` list per key."""
    by_key: dict[str, list[str]] = {}
    for key, member in pairs:
        by_key.setdefault(key, []).append(member)
    return reduce(or_, (Q(key=key, member__in=members) for key, members in by_key.items()))


def insert_if_absent(
    namespace: str, using: str, key: str, value: bytes, ttl_seconds: float | None, now: datetime
) -> bool:
    """Insert ``key`` unless an unexpired value holds it; return whether this call wrote it.

    One statement, so the database decides the race: a concurrent insert of
    the same key waits on the unique index and then sees the winner's row.
    The same SQL runs on SQLite (3.35+) and PostgreSQL.
    """
    connection = connections[using]
    table = connection.ops.quote_name(StorageValue._meta.db_table)
    adapt = connection.ops.adapt_datetimefield_value
    sql = (
        f'INSERT INTO {table} ("namespace", "key", "value", "date_expire") '
        "VALUES (%s, %s, %s, %s) "
        'ON CONFLICT ("namespace", "key") DO UPDATE '
        'SET "value" = excluded."value", "date_expire" = excluded."date_expire" '
        f'WHERE {table}."date_expire" IS NOT NULL AND {table}."date_expire" <= %s '
        'RETURNING "id"'
    )
    params = [namespace, key, value, adapt(expires_at(now, ttl_seconds)), adapt(now)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None
