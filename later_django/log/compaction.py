"""Compaction and cleanup of the retained log, both below the groups' safe boundary.

The boundary of a partition is the lowest next offset any consumer group has
committed there: every group has handled what lies below it. Nothing at or
above it is ever removed, and a partition no group has committed in is left
alone entirely.

Compaction walks each partition once: a checkpoint (``log:compacted:<topic>:
<partition>`` in ``later_storage``) says how far it has gone. A step takes the
next records below the boundary (at most ``limit``), and for each key among
them deletes the records below the step's end that a newer record of the key
replaces (looked up through ``later_logrec_key_idx``). So below the
checkpoint a key keeps one record, and a step costs what its records cost,
however long the log. Concurrent steps on one partition only repeat work.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from ..db import connection_for, to_db, write_transaction
from ..exceptions import InvalidArgument
from ..options import BackendOptions
from ..storage import Storage
from ..topics.registry import partition_count
from .records import log_backend

BATCH = 1000


def boundaries(topic: str, *, backend: str = "default") -> dict[int, int]:
    """The safe boundary of each partition some group has committed in."""
    return _boundaries(log_backend(backend), topic)


def _boundaries(later: BackendOptions, topic: str) -> dict[int, int]:
    with connection_for(later.database).cursor() as cursor:
        cursor.execute(
            "SELECT partition, MIN(next_offset) FROM later_log_consumer_offset "
            "WHERE namespace = %s AND topic = %s GROUP BY partition",
            [later.namespace, topic],
        )
        return dict(cursor.fetchall())


def checkpoint_key(topic: str, partition: int) -> str:
    return f"log:compacted:{topic}:{partition}"


def compacted_to(later: BackendOptions, topic: str, partitions: list[int]) -> dict[int, int]:
    """How far compaction has gone in each of ``partitions`` (0 where it has not begun)."""
    stored = Storage(later.namespace, using=later.database).get_many(
        checkpoint_key(topic, p) for p in partitions
    )
    return {p: int(stored.get(checkpoint_key(topic, p), b"0")) for p in partitions}


def compact(topic: str, *, backend: str = "default", limit: int = BATCH) -> int:
    """Delete, below the boundary, keyed records that a newer record of the same key
    replaces; return how many. Each call takes at most ``limit`` records of each
    partition not yet compacted; call again until it returns 0 to catch up."""
    later = log_backend(backend)
    partition_count(later, topic)
    found = _boundaries(later, topic)
    done = compacted_to(later, topic, sorted(found))
    return sum(
        compact_step(later, topic, p, found[p], done[p], limit=limit)[0] for p in sorted(found)
    )


def compact_step(
    later: BackendOptions, topic: str, partition: int, boundary: int, start: int, *, limit: int
) -> tuple[int, int]:
    """Compact the records of a partition from offset ``start`` up to ``limit`` of them below
    ``boundary``; return (records deleted, the new checkpoint)."""
    end = min(boundary, start + limit)
    if end <= start:
        return 0, start
    with write_transaction(later.database) as cursor:
        cursor.execute(
            "DELETE FROM later_log_record WHERE id IN ("
            " SELECT old.id FROM later_log_record AS old"
            " WHERE old.namespace = %s AND old.topic = %s AND old.partition = %s"
            ' AND old."offset" < %s AND old.key IN (SELECT step.key FROM later_log_record AS step'
            "  WHERE step.namespace = %s AND step.topic = %s AND step.partition = %s"
            '  AND step."offset" >= %s AND step."offset" < %s AND step.key IS NOT NULL)'
            " AND EXISTS (SELECT 1 FROM later_log_record AS newer"
            "  WHERE newer.namespace = old.namespace AND newer.topic = old.topic"
            "  AND newer.partition = old.partition AND newer.key = old.key"
            '  AND newer."offset" > old."offset"))',
            [later.namespace, topic, partition, end, later.namespace, topic, partition, start, end],
        )
        removed = cursor.rowcount
        Storage(later.namespace, using=later.database).set(
            checkpoint_key(topic, partition), str(end).encode()
        )
    return removed, end


def cleanup(
    topic: str, older_than: timedelta, *, backend: str = "default", limit: int = BATCH
) -> int:
    """Delete records appended more than ``older_than`` ago, below the boundary only;
    at most ``limit`` per partition per call."""
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise InvalidArgument(f"older_than is {older_than!r}; it must be a timedelta >= 0.")
    later = log_backend(backend)
    partition_count(later, topic)
    return sum(
        cleanup_step(later, topic, p, boundary, older_than, limit=limit)
        for p, boundary in sorted(_boundaries(later, topic).items())
    )


def cleanup_step(
    later: BackendOptions,
    topic: str,
    partition: int,
    boundary: int,
    older_than: timedelta,
    *,
    limit: int,
) -> int:
    """Delete up to ``limit`` of a partition's records older than ``older_than`` below
    ``boundary``, oldest first (through the age index: a step that finds nothing old
    reads nothing)."""
    cutoff = to_db(connection_for(later.database), timezone.now() - older_than)
    with write_transaction(later.database) as cursor:
        cursor.execute(
            "DELETE FROM later_log_record WHERE id IN ("
            " SELECT id FROM later_log_record WHERE namespace = %s AND topic = %s"
            ' AND partition = %s AND appended_at < %s AND "offset" < %s'
            " ORDER BY appended_at LIMIT %s)",
            [later.namespace, topic, partition, cutoff, boundary, limit],
        )
        return cursor.rowcount
