"""Compaction and cleanup of the retained log, both below the groups' safe boundary.

The boundary of a partition is the lowest next offset any consumer group has
committed there: every group has handled what lies below it. Nothing at or
above it is ever removed, and a partition no group has committed in is left
alone entirely.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from ..db import connection_for, to_db, write_transaction
from ..exceptions import InvalidArgument
from ..topics.registry import partition_count
from .records import log_backend

BATCH = 1000


def boundaries(topic: str, *, backend: str = "default") -> dict[int, int]:
    """The safe boundary of each partition some group has committed in."""
    later = log_backend(backend)
    with connection_for(later.database).cursor() as cursor:
        cursor.execute(
            "SELECT partition, MIN(next_offset) FROM later_log_consumer_offset "
            "WHERE namespace = %s AND topic = %s GROUP BY partition",
            [later.namespace, topic],
        )
        return dict(cursor.fetchall())


def compact(topic: str, *, backend: str = "default", limit: int = BATCH) -> int:
    """Delete, below the boundary, keyed records that a newer record of the same key
    replaces; return how many (at most ``limit`` per partition per call)."""
    later = log_backend(backend)
    partition_count(later, topic)
    removed = 0
    for partition, boundary in sorted(boundaries(topic, backend=backend).items()):
        with write_transaction(later.database) as cursor:
            cursor.execute(
                "DELETE FROM later_log_record WHERE id IN ("
                " SELECT old.id FROM later_log_record AS old"
                " WHERE old.namespace = %s AND old.topic = %s AND old.partition = %s"
                ' AND old."offset" < %s AND old.key IS NOT NULL'
                " AND EXISTS (SELECT 1 FROM later_log_record AS newer"
                "  WHERE newer.namespace = old.namespace AND newer.topic = old.topic"
                "  AND newer.partition = old.partition AND newer.key = old.key"
                '  AND newer."offset" > old."offset")'
                ' ORDER BY old."offset" LIMIT %s)',
                [later.namespace, topic, partition, boundary, limit],
            )
            removed += cursor.rowcount
    return removed


def cleanup(
    topic: str, older_than: timedelta, *, backend: str = "default", limit: int = BATCH
) -> int:
    """Delete records appended more than ``older_than`` ago, below the boundary only."""
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise InvalidArgument(f"older_than is {older_than!r}; it must be a timedelta >= 0.")
    later = log_backend(backend)
    partition_count(later, topic)
    connection = connection_for(later.database)
    cutoff = to_db(connection, timezone.now() - older_than)
    removed = 0
    for partition, boundary in sorted(boundaries(topic, backend=backend).items()):
        with write_transaction(later.database) as cursor:
            cursor.execute(
                "DELETE FROM later_log_record WHERE id IN ("
                " SELECT id FROM later_log_record WHERE namespace = %s AND topic = %s"
                ' AND partition = %s AND "offset" < %s AND appended_at < %s'
                ' ORDER BY "offset" LIMIT %s)',
                [later.namespace, topic, partition, boundary, cutoff, limit],
            )
            removed += cursor.rowcount
    return removed
