"""Bounded history per partition: ``OPTIONS["topics"][name]["keep_last"]``.

A topic declared with ``keep_last`` keeps, in each partition, only the index
rows and stored records of its newest ``keep_last`` finished jobs (by
sequence); older finished jobs are deleted before their retention ends, as
``later_django.jobs.delete_job`` deletes one: the index row and the stored
record, in one transaction. Nothing else belongs to a finished job (its
partition row went when it finished). Unfinished jobs are never touched, and
neither are topics without ``keep_last``.

Each turn visits at most ``PARTITIONS_PER_TURN`` partitions, carrying on
from where the last turn stopped, and deletes at most ``batch`` jobs of each.
A visit reads ``later_jobsindex_done_idx`` (finished jobs of topics only)
from the newest sequence down: ``keep_last + batch`` entries at most, however
many jobs the partition has queued. The stage counters stay exact: the index
triggers count the deletes, as for any other.

Safe from several workers at once: the DELETE re-checks that each row is
still finished, so a job retried meanwhile survives, and a row another worker
deleted first is simply not deleted twice.
"""

from __future__ import annotations

from ..db import connection_for, placeholders, write_transaction
from ..models import StorageValue
from ..records import job_key
from ..states import FINISHED as FINISHED_STAGES
from ..states import sql_list

PARTITIONS_PER_TURN = 256
FINISHED = f"({sql_list(FINISHED_STAGES)})"

# Written to match later_jobsindex_done_idx's condition, so both databases use it.
TRIM = (
    "DELETE FROM later_jobs_index WHERE id IN (SELECT id FROM later_jobs_index "
    'WHERE namespace = %s AND topic = %s AND "partition" = %s AND topic IS NOT NULL '
    f"AND stage IN {FINISHED} ORDER BY sequence DESC LIMIT %s OFFSET %s) "
    f"AND stage IN {FINISHED} RETURNING job_id"
)


def trim_partition(
    namespace: str, topic: str, partition: int, *, keep_last: int, batch: int, using: str
) -> int:
    """Delete up to ``batch`` finished jobs of a partition beyond its newest ``keep_last``."""
    with write_transaction(using) as cursor:
        cursor.execute(TRIM, [namespace, topic, partition, batch, keep_last])
        keys = [job_key(row[0]) for row in cursor.fetchall()]
        if keys:
            StorageValue.objects.using(using).filter(namespace=namespace, key__in=keys).delete()
    return len(keys)


def partitions_after(
    namespace: str, topics: list[str], after: tuple[str, int] | None, *, limit: int, using: str
) -> list[tuple[str, int]]:
    """The next ``limit`` (topic, partition) pairs that have had jobs, after ``after``."""
    start = after or ("", -1)
    with connection_for(using).cursor() as cursor:
        cursor.execute(
            'SELECT topic, "partition" FROM later_partition_sequence WHERE namespace = %s '
            f"AND topic IN ({placeholders(len(topics))}) "
            'AND (topic > %s OR (topic = %s AND "partition" > %s)) '
            'ORDER BY topic, "partition" LIMIT %s',
            [namespace, *topics, start[0], start[0], start[1], limit],
        )
        return [(topic, partition) for topic, partition in cursor.fetchall()]


def trim(
    namespace: str,
    keep_last: dict[str, int],
    after: tuple[str, int] | None,
    *,
    batch: int,
    using: str,
    limit: int = PARTITIONS_PER_TURN,
) -> tuple[int, tuple[str, int] | None]:
    """One turn: trim the next ``limit`` partitions; return (deleted, where to go on from).

    The position is None once the last partition has been visited, so the
    next turn starts again from the first.
    """
    if not keep_last:
        return 0, None
    visit = partitions_after(namespace, sorted(keep_last), after, limit=limit, using=using)
    deleted = 0
    for topic, partition in visit:
        deleted += trim_partition(
            namespace, topic, partition, keep_last=keep_last[topic], batch=batch, using=using
        )
    return deleted, (visit[-1] if len(visit) == limit else None)
