"""Appending records to a topic's retained log and reading them back.

Offsets are allocated per partition in ``later_log_partition``, in the
caller's transaction, independently of job sequence numbers: finishing a job
never removes a record.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from ..db import connection_for, from_db, to_db, write_transaction
from ..exceptions import InvalidArgument
from ..options import BackendOptions, options_for_alias
from ..topics.registry import ensure_layout, partition_count
from ..topics.routing import check_key, partition_for_key

READ_LIMIT = 1000


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: str | None
    payload: bytes
    appended_at: datetime


def log_backend(alias: str) -> BackendOptions:
    """The parsed OPTIONS of the Later backend ``alias``, whose database keeps the log."""
    return options_for_alias(alias, needed_by="the retained log needs")


def _check_partition(topic: str, partition: object, count: int) -> int:
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < count:
        raise InvalidArgument(
            f"partition is {partition!r}; topic {topic!r} has partitions 0 to {count - 1}."
        )
    return partition


def append(
    topic: str, key: str | None, payload: bytes, *, backend: str = "default"
) -> tuple[int, int]:
    """Append one record; return its ``(partition, offset)``.

    ``key`` routes the record with ``partition_for_key`` (records of one key keep
    their order) and is what compaction keeps the newest record of; ``None``
    picks a partition at random and is never compacted. Runs in the caller's
    transaction, so the record commits or rolls back with it.
    """
    return append_many(topic, [(key, payload)], backend=backend)[0]


def append_many(
    topic: str, items: Iterable[tuple[str | None, bytes]], *, backend: str = "default"
) -> list[tuple[int, int]]:
    """Append several ``(key, payload)`` records in one transaction."""
    later = log_backend(backend)
    count = partition_count(later, topic)
    routed = []
    for number, (key, payload) in enumerate(items):
        if key is not None:
            check_key(key)
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise InvalidArgument(
                f"payload #{number} is a {type(payload).__name__}; it must be bytes "
                "(encode text or JSON first)."
            )
        partition = random.randrange(count) if key is None else partition_for_key(key, count)
        routed.append((partition, key, bytes(payload)))
    connection = connection_for(later.database)
    now = to_db(connection, timezone.now())
    placed: list[tuple[int, int]] = []
    with write_transaction(later.database) as cursor:
        ensure_layout(cursor, later, topic, count)
        for partition, key, payload in routed:
            cursor.execute(
                "INSERT INTO later_log_partition (namespace, topic, partition, next_offset) "
                "VALUES (%s, %s, %s, 1) ON CONFLICT (namespace, topic, partition) "
                "DO UPDATE SET next_offset = later_log_partition.next_offset + 1 "
                "RETURNING next_offset - 1",
                [later.namespace, topic, partition],
            )
            offset = cursor.fetchone()[0]
            cursor.execute(
                "INSERT INTO later_log_record "
                '(namespace, topic, partition, "offset", key, payload, appended_at) '
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    later.namespace,
                    topic,
                    partition,
                    offset,
                    None if key is None else key.encode("utf-8"),
                    payload,
                    now,
                ],
            )
            placed.append((partition, offset))
    return placed


def read(
    topic: str,
    partition: int,
    offset: int = 0,
    *,
    limit: int = 100,
    backend: str = "default",
) -> list[Record]:
    """Records of one partition from ``offset`` on, oldest first, at most ``limit``."""
    later = log_backend(backend)
    _check_partition(topic, partition, partition_count(later, topic))
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidArgument(f"offset is {offset!r}; it must be a whole number >= 0.")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= READ_LIMIT:
        raise InvalidArgument(
            f"limit is {limit!r}; it must be a whole number from 1 to {READ_LIMIT}."
        )
    with connection_for(later.database).cursor() as cursor:
        cursor.execute(
            'SELECT "offset", key, payload, appended_at FROM later_log_record '
            'WHERE namespace = %s AND topic = %s AND partition = %s AND "offset" >= %s '
            'ORDER BY "offset" LIMIT %s',
            [later.namespace, topic, partition, offset, limit],
        )
        rows = cursor.fetchall()
    return [
        Record(
            topic=topic,
            partition=partition,
            offset=row[0],
            key=None if row[1] is None else bytes(row[1]).decode("utf-8"),
            payload=bytes(row[2]),
            appended_at=from_db(row[3]) or timezone.now(),
        )
        for row in rows
    ]
